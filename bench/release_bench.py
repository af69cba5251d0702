"""Release benchmark: how long the answer to an ending (a worker's failure report) takes when
0, 100, 1,000 and 5,000 tasks wait for the failed task, and how long until every one of them
has been failed with dependency_failed. The ending changes at most RELEASE_STEP waiters before
it answers and hands the rest to its process's background, so its answer should stay near the
100-waiter figure however many wait. Rounds interleave the sizes (a noisy neighbour hits them
alike); the figures are medians, the answer also as the median of each round's ratio to the
ending with no waiters. File store with fsync on (--no-fsync: off); --pg DSN adds the
PostgreSQL store, in a schema of its own, dropped after.

Run: .venv/bin/python bench/release_bench.py [--quick] [--no-fsync] [--pg DSN]
(BENCH_TREE=path runs the same against the store of another checkout, e.g. one exported from
the commit before the bounded release, for a before/after)
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("BENCH_TREE") or str(Path(__file__).resolve().parent.parent))

from queues.store import QueueSettings, QueueStore, StoreConfig
from queues.store.batch import PostEntry

HOST = "bench.example.com"
S = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600, max_pending=0)
SIZES = (0, 100, 1_000, 5_000)


def awaited(store: Any, queue: str, n: int) -> tuple[str, list[str]]:
    """A claimed task that `n` tasks of its queue wait for (untimed)."""
    dep = store.post(HOST, queue, {"d": 1}, settings=S, posted_by="b").task
    ids: list[str] = []
    for start in range(0, n, 100):
        entries = [
            PostEntry(item={"n": i}, after=(dep.id,)) for i in range(start, min(n, start + 100))
        ]
        ids += [r.task.id for r in store.post_many(HOST, queue, entries, settings=S, posted_by="b")]
    [task] = store.claim(HOST, queue, settings=S, worker="w")
    assert task.id == dep.id
    return dep.id, ids


def one_ending(store: Any, queue: str, n: int) -> tuple[float, float]:
    """Seconds to the ending's answer, and to the last of its `n` waiters released."""
    dep, ids = awaited(store, queue, n)
    start = time.perf_counter()
    store.fail(HOST, queue, dep, settings=S, worker="w", attempt=1, result={"no": 1})
    answered = time.perf_counter()
    wait = getattr(store, "wait_releases", None)  # a store without it releases before answering
    if wait is not None:
        assert wait(600)
    released = time.perf_counter()
    for task_id in ids[:: max(1, n // 20)]:  # a sample: each ended by its dependency
        assert store.read(HOST, queue, task_id).error == "dependency_failed"
    return answered - start, released - start


def measure(name: str, store: Any, rounds: int) -> list[tuple[str, str]]:
    answers: dict[int, list[float]] = {n: [] for n in SIZES}
    alls: dict[int, list[float]] = {n: [] for n in SIZES}
    for r in range(rounds):
        order = SIZES if r % 2 == 0 else tuple(reversed(SIZES))
        for n in order:
            answer, everything = one_ending(store, f"q{r}-{n}", n)
            answers[n].append(answer)
            alls[n].append(everything)
    rows = []
    for n in SIZES:
        ratios = [a / b for a, b in zip(answers[n], answers[0], strict=True)]
        rows.append(
            (
                f"{name}: failure with {n:,} waiting, its answer",
                f"{statistics.median(answers[n]) * 1000:,.1f} ms"
                + (f", {statistics.median(ratios):.2f}x the one without" if n else ""),
            )
        )
        if n:
            rows.append(
                (
                    f"{name}: failure with {n:,} waiting, all released",
                    f"{statistics.median(alls[n]) * 1000:,.0f} ms",
                )
            )
    return rows


def main() -> None:
    rounds = 3 if "--quick" in sys.argv else 5
    fsync = "--no-fsync" not in sys.argv
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        config = StoreConfig(items_dir=Path(tmp) / "items", logs_dir=Path(tmp) / "logs",
                             fsync=fsync)  # fmt: skip
        store = QueueStore(config)
        try:
            rows += measure(f"files (fsync {'on' if fsync else 'off'})", store, rounds)
        finally:
            store.close()
    if "--pg" in sys.argv:
        rows += pg(sys.argv[sys.argv.index("--pg") + 1], rounds)
    width = max(len(k) for k, _ in rows)
    print("$ " + " ".join([".venv/bin/python", *sys.argv]))
    if os.environ.get("BENCH_TREE"):
        print(f"(store of {os.environ['BENCH_TREE']})")
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def pg(dsn: str, rounds: int) -> list[tuple[str, str]]:
    import psycopg
    from psycopg import sql

    from queues.store_pg import PgStoreConfig, PostgresStore

    schema = f"bench_release_{secrets.token_hex(4)}"
    store = PostgresStore(PgStoreConfig(dsn=dsn, schema=schema))
    try:
        return measure("PostgreSQL", store, rounds)
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
