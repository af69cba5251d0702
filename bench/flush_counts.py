"""Flushes the kernel sees per lone verb through the API (issue 34: a post at most 1, a claim
0, a result at most 1), on the default settings (TASKHOSTER_FSYNC on, flush syncfs).

    .venv/bin/python bench/flush_counts.py [--calls 200]

Four children run under `strace -c -f -e trace=syncfs,fsync,fdatasync`, each through Django's
test client: the set-up alone (migrations, tokens, the queue), then the set-up and `--calls`
posts, then also as many claims, then also as many results. A verb's figure is the difference
between its child and the one before it, divided by the calls: counted, not timed, so the
machine's noise does not move it. Whatever the console's database flushes per request counts
too: it is part of what the verb costs.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from api_bench import HOST, QUEUE, set_up, tokens

PHASES = ("setup", "post", "claim", "result")
CALLS = ("syncfs", "fsync", "fdatasync")
_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def child(phase: str, calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="th-flush-counts-") as tmp:
        set_up(Path(tmp), True)
        from django.test import Client

        keys = tokens()
        client = Client()
        producer = {"HTTP_AUTHORIZATION": f"Bearer {keys['producer']}"}
        worker = {"HTTP_AUTHORIZATION": f"Bearer {keys['worker']}"}
        base = f"/api/v1/queues/{HOST}/{QUEUE}"
        claimed = []
        for done, verb in enumerate(PHASES[1:], start=1):
            if PHASES.index(phase) < done:
                break
            for n in range(calls):
                if verb == "post":
                    got = client.post(f"{base}/tasks", b'{"n":1}', "application/json", **producer)
                elif verb == "claim":
                    got = client.post(f"{base}/claim", b'{"worker":"w1"}', "application/json",
                                      **worker)  # fmt: skip
                    claimed.append(got.json())
                else:
                    task = claimed[n]
                    body = b'{"worker":"w1","attempt":%d,"result":{}}' % task["attempts"]
                    got = client.post(f"{base}/tasks/{task['id']}/result", body,
                                      "application/json", **worker)  # fmt: skip
                assert got.status_code in (200, 201), got.content


def counted(phase: str, calls: int, out: Path) -> dict[str, int]:
    """The flush calls of one child, by name, from strace -c's table."""
    subprocess.run(
        ["strace", "-c", "-f", "-o", str(out), "-e", f"trace={','.join(CALLS)}",
         sys.executable, __file__, "--child", phase, "--calls", str(calls)],
        check=True,
    )  # fmt: skip
    found = dict.fromkeys(CALLS, 0)
    for line in out.read_text().splitlines():
        m = _ROW.match(line)
        if m and m.group(2) in found:
            found[m.group(2)] = int(m.group(1))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--child", choices=PHASES)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls)
        return
    if shutil.which("strace") is None:
        sys.exit("strace is not installed (apt-get install strace)")
    os.environ.pop("TASKHOSTER_FLUSH", None)  # the default: syncfs
    with tempfile.TemporaryDirectory() as tmp:
        totals = {p: counted(p, args.calls, Path(tmp) / f"{p}.txt") for p in PHASES}
    print(f"$ {' '.join([sys.executable, *sys.argv])}")
    print(f"flushes per call through the API (Django test client), {args.calls} calls each")
    print(f"{'verb':<8}" + "".join(f"{c:>11}" for c in CALLS))
    for before, verb in itertools.pairwise(PHASES):
        per = [(totals[verb][c] - totals[before][c]) / args.calls for c in CALLS]
        print(f"{verb:<8}" + "".join(f"{v:11.2f}" for v in per))


if __name__ == "__main__":
    main()
