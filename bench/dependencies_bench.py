"""Dependencies benchmark (file store, fsync off): a claim on a queue that also holds 10,000
waiting tasks against one on a queue without them, and the release of one task's dependents in a
queue holding 10,000 other waiting tasks against one holding none. Each figure is a ratio to its
baseline measured in the same run, rounds interleaved, the median taken.

Run: .venv/bin/python bench/dependencies_bench.py [--quick] [--pg DSN]
(--pg: the same claim rows on the PostgreSQL store, in a schema of its own, dropped after)
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.store import QueueSettings, QueueStore, StoreConfig
from queues.store.batch import PostEntry
from queues.store_pg import PgStoreConfig, PostgresStore

HOST, QUEUE = "bench.example.com", "q"
S = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600, max_pending=0)


def make_store(root: Path) -> QueueStore:
    return QueueStore(StoreConfig(items_dir=root / "items", logs_dir=root / "logs", fsync=False))


def post_many(store: QueueStore | PostgresStore, n: int, **entry: object) -> list[str]:
    ids: list[str] = []
    for start in range(0, n, 100):
        entries = [PostEntry(item={"n": i}, **entry) for i in range(start, min(n, start + 100))]  # type: ignore[arg-type]
        ids += [r.task.id for r in store.post_many(HOST, QUEUE, entries, settings=S, posted_by="b")]
    return ids


def fill(store: QueueStore | PostgresStore, claimable: int, waiting: int) -> None:
    """A queue of `claimable` tasks and `waiting` more that wait for a task never claimed (it
    is delayed)."""
    blocker = store.post(HOST, QUEUE, {"b": 1}, settings=S, posted_by="b", delay_seconds=86400)
    post_many(store, waiting, after=(blocker.task.id,))
    post_many(store, claimable)


def filled(root: Path, claimable: int, waiting: int) -> QueueStore:
    """fill() on the file store, opened afresh (its index loaded by a first claim, untimed)."""
    store = make_store(root)
    fill(store, claimable, waiting)
    store.close()
    store = make_store(root)
    store.claim(HOST, QUEUE, settings=S, worker="w")
    return store


def pg_claims(dsn: str, waiting: int, rounds: int, per_round: int) -> list[tuple[str, str]]:
    """The claim rows on the PostgreSQL store: one schema per queue kind, each its own host."""
    import psycopg
    from psycopg import sql

    schemas = [f"bench_deps_{secrets.token_hex(4)}_{kind}" for kind in ("plain", "waiting")]
    stores = [PostgresStore(PgStoreConfig(dsn=dsn, schema=schema)) for schema in schemas]
    try:
        for store, depth in zip(stores, (0, waiting), strict=True):
            fill(store, rounds * per_round + 10, depth)
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(
                    schemas[stores.index(store)])))  # fmt: skip
                conn.execute("ANALYZE th_tasks")
            store.claim(HOST, QUEUE, settings=S, worker="w")
        without, with_waiting = [], []
        for _ in range(rounds):
            without.append(claims(stores[0], per_round))
            with_waiting.append(claims(stores[1], per_round))
    finally:
        for store in stores:
            store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(schema)))  # fmt: skip
    a, b = statistics.median(without), statistics.median(with_waiting)
    return [
        ("claim, PostgreSQL, queue without waiting tasks", f"{a:,.0f} µs"),
        (f"claim, PostgreSQL, with {waiting:,} waiting tasks", f"{b:,.0f} µs, {b / a:.2f}x"),
    ]


def claims(store: QueueStore | PostgresStore, n: int) -> float:
    """µs per claim of one task."""
    start = time.perf_counter()
    for _ in range(n):
        assert store.claim(HOST, QUEUE, settings=S, worker="w")
    return (time.perf_counter() - start) / n * 1e6


def release_cost(store: QueueStore, dependents: int) -> float:
    """µs to finish a task that `dependents` tasks wait for (its release included)."""
    dep = store.post(HOST, QUEUE, {"d": 1}, settings=S, posted_by="b", priority=100).task
    post_many(store, dependents, after=(dep.id,), priority=-100)
    [task] = store.claim(HOST, QUEUE, settings=S, worker="w")
    assert task.id == dep.id
    start = time.perf_counter()
    store.finish(HOST, QUEUE, dep.id, settings=S, worker="w", attempt=1, result={})
    return (time.perf_counter() - start) * 1e6


def main() -> None:
    quick = "--quick" in sys.argv
    waiting, rounds, per_round = 10_000, 3 if quick else 7, 200
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        base = Path(tmp)
        plain = filled(base / "plain", rounds * per_round + 10, 0)
        deep = filled(base / "waiting", rounds * per_round + 10, waiting)
        without, with_waiting = [], []
        for _ in range(rounds):  # interleaved, so a noisy neighbour hits both alike
            without.append(claims(plain, per_round))
            with_waiting.append(claims(deep, per_round))
        a, b = statistics.median(without), statistics.median(with_waiting)
        rows += [
            ("claim, queue without waiting tasks", f"{a:,.0f} µs"),
            (f"claim, queue with {waiting:,} waiting tasks", f"{b:,.0f} µs, {b / a:.2f}x"),
        ]
        for dependents in (10, 100):
            lones, amongs = [], []
            for _ in range(rounds):  # interleaved too
                lones.append(release_cost(plain, dependents))
                amongs.append(release_cost(deep, dependents))
            lone, among = statistics.median(lones), statistics.median(amongs)
            rows += [
                (
                    f"finish + release of {dependents} dependents, no other waiting",
                    f"{lone:,.0f} µs",
                ),
                (
                    f"finish + release of {dependents} dependents, {waiting:,} others waiting",
                    f"{among:,.0f} µs, {among / lone:.2f}x",
                ),
            ]
        plain.close()
        deep.close()
    if "--pg" in sys.argv:
        rows += pg_claims(sys.argv[sys.argv.index("--pg") + 1], waiting, rounds, per_round)
    width = max(len(k) for k, _ in rows)
    print("$ " + " ".join([".venv/bin/python", *sys.argv]))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
