"""Flush benchmark: durable one-at-a-time lifecycles (post, claim, finish) from threads of one
process, per-file fsync against syncfs (TASKHOSTER_FLUSH), where syncfs's group commit lets the
threads share each flush (issue 24: 8 threads at least 3x one thread with fsync).

    .venv/bin/python bench/flush_bench.py [--quick] [--lifecycles 400] [--runs 5]

The rows take turns, run after run, and each "vs" is the median of the run-by-run ratios to one
thread with fsync, so a noisy machine's slow minute falls on both sides. Beside each row: the
flushes (syncfs rounds) per lifecycle, counted through queues.store.flushing.FLUSH_OBSERVERS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from store_bench import HOST, QUEUE, S, make_store  # noqa: E402

from queues.store import flushing  # noqa: E402

ROWS = (("fsync", 1), ("fsync", 8), ("syncfs", 1), ("syncfs", 8))  # (flush, threads)


def lifecycles(root: Path, flush: str, threads: int, n: int) -> tuple[float, int]:
    """n lifecycles shared among `threads` threads of one store: (lifecycles/s, flushes)."""
    store = make_store(root, True, flush)
    store.create_queue(HOST, QUEUE)
    flushes: list[float] = []
    flushing.FLUSH_OBSERVERS.append(flushes.append)
    errors: list[BaseException] = []

    def worker(count: int, name: str) -> None:
        try:
            for _ in range(count):
                store.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="bench")
                task = store.claim(HOST, QUEUE, settings=S, worker=name)[0]
                store.finish(HOST, QUEUE, task.id, settings=S, worker=name,
                             attempt=task.attempts, result=None)  # fmt: skip
        except BaseException as exc:  # reported below: a bench that failed has no figure
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(n // threads, f"w{i}")) for i in range(threads)]
    started = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    took = time.perf_counter() - started
    flushing.FLUSH_OBSERVERS.remove(flushes.append)
    store.close()
    if errors:
        raise errors[0]
    return (n // threads * threads) / took, len(flushes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="160 lifecycles, 3 runs")
    parser.add_argument("--lifecycles", type=int, default=None, help="per run (default 400)")
    parser.add_argument("--runs", type=int, default=None, help="default 5")
    args = parser.parse_args()
    n = args.lifecycles or (160 if args.quick else 400)
    runs = args.runs or (3 if args.quick else 5)
    print("$ " + " ".join([".venv/bin/python", "bench/flush_bench.py", *sys.argv[1:]]), flush=True)
    load_before = os.getloadavg()[0]
    rates: dict[tuple[str, int], list[float]] = {row: [] for row in ROWS}
    per: dict[tuple[str, int], list[float]] = {row: [] for row in ROWS}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        for run in range(runs):
            for flush, threads in ROWS:
                root = Path(tmp) / f"{flush}-{threads}-{run}"
                rate, flushes = lifecycles(root, flush, threads, n)
                rates[(flush, threads)].append(rate)
                per[(flush, threads)].append(flushes / n)
                print(f"run {run + 1}: {flush}, {threads} thread(s): {rate:,.0f} lifecycles/s",
                      flush=True)  # fmt: skip
    base = rates[ROWS[0]]
    print()
    print(f"{n:,} durable lifecycles (post, claim, finish) per run, one process; median of "
          f"{runs} runs (min-max); load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after.")  # fmt: skip
    print()
    print("| flush | threads | lifecycles/s | vs 1 thread, fsync | syncfs rounds per lifecycle |")
    print("| --- | --- | --- | --- | --- |")
    for row in ROWS:
        got = rates[row]
        ratio = statistics.median(a / b for a, b in zip(got, base, strict=True))
        rounds = f"{statistics.median(per[row]):.2f}" if row[0] == "syncfs" else "-"
        print(f"| {row[0]} | {row[1]} | {statistics.median(got):,.0f} "
              f"({min(got):,.0f}-{max(got):,.0f}) | {ratio:.2f}x | {rounds} |")  # fmt: skip
    best = statistics.median(a / b for a, b in zip(rates[("syncfs", 8)], base, strict=True))
    print()
    print(f"Target of issue 24: 8 threads durable at least 3x one thread with fsync: "
          f"{best:.2f}x ({'met' if best >= 3 else 'missed'}).")  # fmt: skip


if __name__ == "__main__":
    main()
