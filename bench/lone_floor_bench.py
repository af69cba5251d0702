"""One at a time, durable: the store beside the floor of its one-at-a-time protocol and beside
SqliteHuey with fsync=True, in one sitting, taking turns run after run (issue 34).

    .venv/bin/python bench/lone_floor_bench.py [--tasks 1000] [--runs 3] [--dir var]

- `floor`: bench/floor/lone_floor.c, compiled at the start of the run with the system's cc: the
  system calls of N lone posts, then N lone claims and results, with the store's flushes of the
  fourth version (one a post, none a claim, one a result, by syncfs) and nothing else;
- `store`: QueueStore.post one at a time, then one consumer process that claims and finishes
  one at a time (bench/peers_bench.py's taskhoster-syncfs run);
- `huey`: SqliteHuey with fsync=True (synchronous=FULL), one consumer (bench/peers/drain.py in
  var/bench-peers-venv, made on the first run).

Each ratio is the median of the run-by-run ratios, so that the disk's slow minutes (they swing
several-fold here, with other programs' writes in the same syncfs) fall on both sides.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from peers_bench import durability, peer_run, peers_python, taskhoster_run  # noqa: E402

SOURCE = HERE / "floor" / "lone_floor.c"
SYSTEMS = ("floor", "store", "huey")


def compile_floor(out: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("no C compiler (cc or gcc) to build bench/floor/lone_floor.c")
    binary = out / "lone_floor"
    subprocess.run([cc, "-O2", "-o", str(binary), str(SOURCE)], check=True)
    return binary


def floor_run(binary: Path, n: int, root: Path) -> dict[str, float]:
    done = subprocess.run([str(binary), str(n), str(root), "syncfs"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return orjson.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=HERE.parent / "var", help="where runs write")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    sitting = Path(tempfile.mkdtemp(prefix="lone-floor-", dir=args.dir))
    binary, python = compile_floor(sitting), peers_python()
    rates: dict[str, list[dict[str, float]]] = {system: [] for system in SYSTEMS}
    for run in range(args.runs):  # no run's files are removed before the last run's end
        for system in SYSTEMS:
            root = sitting / f"{system}-{run}"
            root.mkdir()
            if system == "floor":
                got = floor_run(binary, args.tasks, root)
            elif system == "store":
                got = taskhoster_run(durability("taskhoster-syncfs"), args.tasks, 1, root)
            else:
                got = peer_run(python, "huey-sqlite-fsync", args.tasks, 1, root)
            rates[system].append(got)
            print(f"run {run + 1} {system}: post {got['post']:,.0f}/s, drain {got['drain']:,.0f}/s",
                  flush=True)  # fmt: skip
    print(f"\n{args.tasks:,} tasks one at a time, durable (syncfs), 1 consumer, {args.runs} runs")
    for what in ("post", "drain"):
        for a, b in (("store", "huey"), ("floor", "huey"), ("store", "floor")):
            pairs = [x[what] / y[what] for x, y in zip(rates[a], rates[b], strict=True)]
            print(f"{what}: {a} / {b} = {statistics.median(pairs):.2f}x "
                  f"(runs {', '.join(f'{p:.2f}' for p in pairs)})")  # fmt: skip
    shutil.rmtree(sitting, ignore_errors=True)


if __name__ == "__main__":
    main()
