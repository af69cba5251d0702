"""Run every fuzz harness for N seconds each and print one line of figures per harness.

    .venv/bin/python fuzz/run.py 300      # `make fuzz`: 5 minutes each
    .venv/bin/python fuzz/run.py 20       # the CI smoke

Corpora grow under var/fuzz/<harness>/ (seeded from fuzz/seeds/<harness>/); a crashing input is
written to var/fuzz/crashes/. Exits 1 if any harness found a crash.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HARNESSES = {"json_body": "fuzz_json_body.py", "names": "fuzz_names.py"}


def run(name: str, seconds: int) -> tuple[bool, str]:
    corpus = ROOT / "var" / "fuzz" / name
    crashes = ROOT / "var" / "fuzz" / "crashes"
    corpus.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    try:
        proc = subprocess.run(  # noqa: S603 -- our own harness, argv built here, no shell
            [
                sys.executable,
                str(HERE / HARNESSES[name]),
                str(corpus),
                str(HERE / "seeds" / name),
                f"-max_total_time={seconds}",
                "-print_final_stats=1",
                f"-artifact_prefix={crashes}/{name}-",
                "-timeout=10",
                "-rss_limit_mb=2048",
            ],
            cwd=ROOT,
            env={**os.environ, "FUZZ_WORKDIR": str(work)},
            capture_output=True,
            text=True,
            timeout=seconds + 120,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log = proc.stderr
    (ROOT / "var" / "fuzz" / f"{name}.log").write_text(log)
    stat = dict(re.findall(r"stat::(\w+):\s+(\d+)", log))
    cov = re.findall(r"cov: (\d+) ft: (\d+)", log)
    edges, features = cov[-1] if cov else ("?", "?")
    crashed = proc.returncode != 0
    line = (
        f"{name:10} {seconds:>5} s  execs {stat.get('number_of_executed_units', '?'):>9}"
        f"  exec/s {stat.get('average_exec_per_sec', '?'):>6}  edges {edges:>4}"
        f"  features {features:>5}  corpus {len(list(corpus.iterdir())):>5}"
        f"  crashes {1 if crashed else 0}"
    )
    if crashed:
        line += "\n" + "\n".join(log.splitlines()[-30:])
    return not crashed, line


def main() -> int:
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    ok = True
    print(f"$ {Path(sys.executable).name} fuzz/run.py {seconds}")
    for name in HARNESSES:
        passed, line = run(name, seconds)
        ok &= passed
        print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
