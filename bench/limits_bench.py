"""Flow control benchmark: the claim rate of a queue whose limits are set but not reached,
against the same queue without them, in the same run (issue 27: within 10%).

    .venv/bin/python bench/limits_bench.py [--quick] [--claims 2000] [--runs 5] [--fsync]

Each run posts `claims` tasks to a fresh queue and claims them one at a time from one thread,
finishing each (untimed: only the claims are timed, and processing stays small), once per row.
The rows take turns, run after run, and each "vs" is the median of the run-by-run ratios to the
unlimited row, so a noisy machine's slow minute falls on both sides. The limits are far above
what the claims reach: a rate of 10^6 a second, maxProcessing and maxPerKey larger than the run
(the keyed row's tasks carry 16 keys).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from store_bench import HOST, QUEUE, S, make_store  # noqa: E402

from queues.store import PostEntry  # noqa: E402

BIG = 10**6
ROWS = {
    "no limits": (S, False),
    "maxProcessing": (replace(S, max_processing=BIG), False),
    "rate limit": (replace(S, rate_count=BIG, rate_seconds=1), False),
    "all three, keyed tasks": (
        replace(S, rate_count=BIG, rate_seconds=1, max_processing=BIG, max_per_key=BIG),
        True,
    ),
}


def claims_per_second(root: Path, settings, keyed: bool, n: int, fsync: bool) -> float:
    store = make_store(root, fsync)
    try:
        for start in range(0, n, 100):
            entries = [
                PostEntry(item={"n": i}, concurrency_key=f"k{i % 16}" if keyed else None)
                for i in range(start, min(start + 100, n))
            ]
            store.post_many(HOST, QUEUE, entries, settings=settings, posted_by="bench")
        took, got = 0.0, 0
        while got < n:
            started = time.perf_counter()
            tasks = store.claim(HOST, QUEUE, settings=settings, worker="w")
            took += time.perf_counter() - started
            if not tasks:
                raise RuntimeError(f"a claim got nothing after {got} of {n}: a limit was reached")
            got += len(tasks)
            for task in tasks:  # finished, untimed: a worker's processing stays small
                store.finish(HOST, QUEUE, task.id, settings=settings, worker="w",
                             attempt=task.attempts, result=None)  # fmt: skip
        return n / took
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 claims, 3 runs")
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fsync", action="store_true", help="durable claims (default: off)")
    args = parser.parse_args()
    claims, runs = (500, 3) if args.quick else (args.claims, args.runs)
    print(f"$ bench/limits_bench.py{' --quick' if args.quick else ''}"
          f"{' --fsync' if args.fsync else ''}: {claims} claims x {runs} runs, "
          f"fsync {'on' if args.fsync else 'off'}")  # fmt: skip
    rates: dict[str, list[float]] = {name: [] for name in ROWS}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            for name, (settings, keyed) in ROWS.items():
                root = Path(tmp) / f"{run}-{len(rates[name])}-{name.replace(' ', '_')}"
                rates[name].append(claims_per_second(root, settings, keyed, claims, args.fsync))
    base = rates["no limits"]
    print(f"{'row':<24} {'claims/s':>10} {'vs no limits':>13}")
    for name, got in rates.items():
        ratio = statistics.median(g / b for g, b in zip(got, base, strict=True))
        print(f"{name:<24} {statistics.median(got):>10,.0f} {ratio:>12.2f}x")


if __name__ == "__main__":
    main()
