"""Sweep benchmark (file store): a pass of the sweep loop over a queue holding N done tasks,
once the loop has read them (done_records.py), against a pass that reads every done record (what
every pass did before, and what the first pass of a loop and a one-off `sweep` still do).

Each round times one pass of each: the loop's store, kept from round to round, and a store
opened afresh; the two take turns going first. A figure is the median of the rounds' ratios of
the loop's pass to the fresh one's. Also: the memory the kept records take (tracemalloc).

Run: .venv/bin/python bench/sweep_bench.py [--quick] [--sizes 10000,50000] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.store import QueueSettings, QueueStore, StoreConfig, sweep_queue
from queues.store.batch import PostEntry

HOST = "bench.example.com"
S = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600, retain_seconds=7 * 86400,
                  max_pending=0)  # fmt: skip


def fill(store: QueueStore, queue: str, n: int) -> None:
    """n tasks posted, claimed and finished, 100 at a time, and 10 left pending."""
    for start in range(0, n, 100):
        entries = [PostEntry(item={"n": i, "pad": "x" * 200}) for i in range(start, start + 100)]
        store.post_many(HOST, queue, entries, settings=S, posted_by="bench")
        for task in store.claim(HOST, queue, settings=S, worker="w", max_tasks=100):
            store.finish(HOST, queue, task.id, settings=S, worker="w", attempt=1,
                         result={"ok": True})  # fmt: skip
    store.post_many(HOST, queue, [PostEntry(item={"left": i}) for i in range(10)], settings=S,
                    posted_by="bench")  # fmt: skip


def one_pass(store: QueueStore, queue: str) -> float:
    started = time.perf_counter()
    report = sweep_queue(store, HOST, queue, S, now=int(time.time() * 1000))
    took = time.perf_counter() - started
    assert report.cleaned == 0 and not report.errors, report
    return took


def kept_memory(config: StoreConfig, queue: str) -> float:
    """MB a store that swept the queue once holds more than before it (tracemalloc): the kept
    records, their ids, and the little else a pass leaves (the queue held open, its index)."""
    store = QueueStore(config)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    one_pass(store, queue)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    store.close()
    return grown / 1e6


def measure(n: int, rounds: int, base_dir: str | None) -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory(dir=base_dir) as tmp:
        config = StoreConfig(items_dir=Path(tmp) / "items", logs_dir=Path(tmp) / "logs",
                             fsync=False)  # fmt: skip
        filler = QueueStore(config)
        fill(filler, "q", n)
        filler.close()
        time.sleep(0.2)  # the last records past the age a stamp trusts (stamps.RACY_NS)
        loop = QueueStore(config)
        one_pass(loop, "q")  # the loop's first pass: it reads them all
        fresh_times, loop_times = [], []
        for r in range(rounds):
            fresh = QueueStore(config)
            if r % 2:
                loop_times.append(one_pass(loop, "q"))
                fresh_times.append(one_pass(fresh, "q"))
            else:
                fresh_times.append(one_pass(fresh, "q"))
                loop_times.append(one_pass(loop, "q"))
            fresh.close()
        loop.close()
        memory = kept_memory(config, "q")
    ratios = [w / c for w, c in zip(loop_times, fresh_times, strict=True)]
    return [
        (f"{n:,} done: a pass reading every record",
         f"{statistics.median(fresh_times) * 1000:,.0f} ms"),
        (f"{n:,} done: a pass of the loop after its first",
         f"{statistics.median(loop_times) * 1000:,.0f} ms, {statistics.median(ratios):.2f}x "
         f"(median of {rounds} rounds' ratios)"),
        (f"{n:,} done: memory a pass leaves held",
         f"{memory:.1f} MB ({memory * 1e6 / n:.0f} bytes a record)"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 done tasks, 5 rounds")
    parser.add_argument("--sizes", default="10000,50000", help="done tasks per queue, a list")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    sizes = [10_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    rounds = 5 if args.quick else args.rounds
    rows = []
    for n in sizes:
        rows += measure(n, rounds, os.environ.get("BENCH_DIR"))
    print("$ " + " ".join([".venv/bin/python", *sys.argv]))
    print(f"page cache warm, no flushes; load average {os.getloadavg()[0]:.1f}")
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
