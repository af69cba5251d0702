"""Groups benchmark (file store): what an ending (a worker's finish) of a task that is a member
of a group costs, against the ending of a task in no group, for a group of 400 members and one
of 10,000 (an ending costs the same whatever the group's size: one marker and one count
rewrite). Each round finishes `per_round` tasks of each queue one by one, queues alternating
round after round; a figure is the median of the rounds' ratios to the no-group baseline.

Run: .venv/bin/python bench/groups_bench.py [--quick] [--no-fsync]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.store import QueueSettings, QueueStore, StoreConfig
from queues.store.batch import OnComplete, PostEntry

HOST = "bench.example.com"
S = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600, max_pending=0)
CALLBACK = OnComplete(queue="callbacks", item={}, settings=S)


def fill(store: QueueStore, queue: str, n: int, group: str | None) -> None:
    """n tasks in `queue`, all members of `group` (closed by the last batch) or of none."""
    for start in range(0, n, 100):
        last = start + 100 >= n
        entries = [PostEntry(item={"n": i}) for i in range(start, min(n, start + 100))]
        store.post_many(HOST, queue, entries, settings=S, posted_by="b", group=group,
                        on_complete=CALLBACK if group and last else None)  # fmt: skip


def finishes(store: QueueStore, queue: str, n: int) -> float:
    """µs per finish of one claimed task (claims untimed)."""
    claimed = store.claim(HOST, queue, settings=S, worker="w", max_tasks=n)
    assert len(claimed) == n
    start = time.perf_counter()
    for task in claimed:
        store.finish(HOST, queue, task.id, settings=S, worker="w", attempt=1, result={})
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    quick, fsync = "--quick" in sys.argv, "--no-fsync" not in sys.argv
    rounds, per_round = (3, 30) if quick else (9, 40)
    kinds = [("no group", "plain", None, 0), ("group of 400", "small", "small", 400),
             ("group of 10,000", "big", "big", 10_000)]  # fmt: skip
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        config = StoreConfig(items_dir=Path(tmp) / "items", logs_dir=Path(tmp) / "logs",
                             fsync=fsync)  # fmt: skip
        store = QueueStore(config)
        for _, queue, group, size in kinds:
            fill(store, queue, max(size, rounds * per_round), group)
        times: dict[str, list[float]] = {label: [] for label, *_ in kinds}
        for r in range(rounds):  # the order turns each round, so no queue always goes first
            order = kinds[r % 3 :] + kinds[: r % 3]
            for label, queue, _, _ in order:
                times[label].append(finishes(store, queue, per_round))
        store.close()
    base = times["no group"]
    rows = [("finish, a task in no group", f"{statistics.median(base):,.0f} µs")]
    for label, *_ in kinds[1:]:
        ratios = [t / b for t, b in zip(times[label], base, strict=True)]
        median, ratio = statistics.median(times[label]), statistics.median(ratios)
        figure = f"{median:,.0f} µs, {ratio:.2f}x (median of {rounds} rounds' ratios)"
        rows.append((f"finish, a member of a {label}", figure))
    print("$ " + " ".join([".venv/bin/python", *sys.argv]))
    print(f"fsync {'on' if fsync else 'off'}, {per_round} finishes per queue per round, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
