"""One peer's run of the peers benchmark: post N no-op tasks, then drain them with C consumer
processes that acknowledge each. Runs with the throw-away interpreter that has the peers
(var/bench-peers-venv), never the project's; prints one JSON line.

    drain.py SYSTEM --tasks N --consumers C --dir DIR [--cap SECONDS]

--cap: the depth runs (file and SQLite peers): N tasks posted (the fill, not timed), then the
consumers drain for at most SECONDS; the rate is over the tasks they took in that time.

SYSTEM: huey-sqlite, huey-sqlite-fsync, huey-file, pq-sqlite, pq-file, rq
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from importlib.metadata import version
from pathlib import Path

REDIS_URL = "redis://127.0.0.1:6379/0"
ITEM = {"n": 1}


def noop(item: object = None) -> None:
    """The task every system runs: nothing."""


# --- each system: a factory of its queue, how to post one, how to take and acknowledge one ----


def huey_queue(system: str, folder: str):  # type: ignore[no-untyped-def]
    from huey import FileHuey, SqliteHuey

    if system == "huey-file":
        return FileHuey("bench", path=f"{folder}/huey-files")  # a file lock: safe across processes
    # SqliteHuey's durability switch: fsync=True sets PRAGMA synchronous=FULL, False sets OFF
    # (left unset, SQLite's compiled default applies; --versions reports it).
    return SqliteHuey(
        "bench", filename=f"{folder}/huey.sqlite3", fsync=system == "huey-sqlite-fsync"
    )


def huey_post(queue, n: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(n):
        queue.storage.enqueue(json.dumps(ITEM).encode(), priority=0)


def huey_take(queue) -> bool:  # type: ignore[no-untyped-def]
    # Huey removes a message as it dequeues it: the dequeue is the acknowledgement.
    data = queue.storage.dequeue()
    if data is None:
        return False
    noop(json.loads(data))
    return True


def pq_queue(system: str, folder: str):  # type: ignore[no-untyped-def]
    import persistqueue

    if system == "pq-file":
        return persistqueue.Queue(f"{folder}/pq-file", autosave=True)
    return persistqueue.SQLiteAckQueue(f"{folder}/pq-sqlite", auto_commit=True, multithreading=True)


def pq_post(queue, n: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(n):
        queue.put(ITEM)


def pq_take(queue) -> bool:  # type: ignore[no-untyped-def]
    import persistqueue

    try:
        item = queue.get(block=False)
    except persistqueue.Empty:
        return False
    noop(item)
    if hasattr(queue, "ack"):
        queue.ack(item)
    else:
        queue.task_done()
    return True


def open_queue(system: str, folder: str):  # type: ignore[no-untyped-def]
    return pq_queue(system, folder) if system.startswith("pq-") else huey_queue(system, folder)


def post(system: str, folder: str, n: int) -> None:
    queue = open_queue(system, folder)
    (pq_post if system.startswith("pq-") else huey_post)(queue, n)


def consume(system: str, folder: str, start: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    queue = open_queue(system, folder)
    take = pq_take if system.startswith("pq-") else huey_take
    start.wait()
    done = 0
    while take(queue):
        done += 1
    out.put(done)


# --- RQ: enqueue, then burst workers that do not fork per job ----------------------------------


def rq_post(name: str, n: int) -> None:
    from redis import Redis
    from rq import Queue

    queue = Queue(name, connection=Redis.from_url(REDIS_URL))
    for _ in range(n):
        queue.enqueue("drain.noop", ITEM, result_ttl=0)  # by name: workers import it


def rq_consume(name: str, folder: str, start: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from redis import Redis
    from rq import Queue, SimpleWorker

    connection = Redis.from_url(REDIS_URL)
    worker = SimpleWorker([Queue(name, connection=connection)], connection=connection)
    start.wait()
    worker.work(burst=True, logging_level="WARNING")
    out.put(0)  # the parent counts what is left instead: the worker keeps its counts in Redis


def rq_done(name: str, n: int) -> int:
    """How many of the n jobs ran: none left queued, none failed."""
    from redis import Redis
    from rq import Queue
    from rq.registry import FailedJobRegistry

    queue = Queue(name, connection=Redis.from_url(REDIS_URL))
    return n - queue.count - FailedJobRegistry(queue=queue).count


def rq_cleanup(name: str) -> None:
    from redis import Redis

    redis = Redis.from_url(REDIS_URL)
    redis.srem("rq:queues", f"rq:queue:{name}")
    keys = list(redis.scan_iter(f"rq:*{name}*"))
    if keys:
        redis.delete(*keys)


# --- the run ---------------------------------------------------------------------------------


def run(system: str, n: int, consumers: int, folder: str) -> dict[str, object]:
    is_rq = system == "rq"
    target = f"taskhoster-bench-{os.getpid()}" if is_rq else folder
    started = time.perf_counter()
    (rq_post if is_rq else lambda t, k: post(system, t, k))(target, n)
    post_s = time.perf_counter() - started
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    consumer = rq_consume if is_rq else consume
    args = (target, folder) if is_rq else (system, folder)
    procs = [ctx.Process(target=consumer, args=(*args, start, out)) for _ in range(consumers)]
    for p in procs:
        p.start()
    time.sleep(1.0)  # every consumer imported its system and opened its queue: not timed
    started = time.perf_counter()
    start.set()
    drained = sum(out.get() for _ in procs)
    drain_s = time.perf_counter() - started
    for p in procs:
        p.join()
    if is_rq:
        drained = rq_done(target, n)
        rq_cleanup(target)
    if drained < n:
        sys.exit(f"{system}: drained {drained} of {n}")
    # More than n: a task handed to two consumers (a queue not made for several processes).
    return {"post": n / post_s, "drain": n / drain_s, "duplicates": drained - n}


# --- the depth runs: a fill, then a drain stopped by a time cap --------------------------------


def consume_until(system: str, folder: str, cap: float, start: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    queue = open_queue(system, folder)
    take = pq_take if system.startswith("pq-") else huey_take
    start.wait()
    deadline = time.monotonic() + cap
    done = 0
    while time.monotonic() < deadline and take(queue):
        done += 1
    out.put(done)


def run_capped(system: str, n: int, consumers: int, folder: str, cap: float) -> dict[str, object]:
    """n tasks queued, then drained for at most `cap` seconds: the drain rate at depth n."""
    if system == "rq":
        sys.exit("--cap is for the peers on local files")
    started = time.perf_counter()
    post(system, folder, n)
    fill_s = time.perf_counter() - started
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=consume_until, args=(system, folder, cap, start, out))
             for _ in range(consumers)]  # fmt: skip
    for p in procs:
        p.start()
    time.sleep(1.0)  # every consumer imported its system and opened its queue: not timed
    started = time.perf_counter()
    start.set()
    drained = sum(out.get() for _ in procs)
    drain_s = time.perf_counter() - started
    for p in procs:
        p.join()
    if drained > n:
        sys.exit(f"{system}: {drained} taken of {n}: a task was handed out twice")
    return {"drain": drained / drain_s, "drained": drained, "seconds": drain_s, "fill": n / fill_s}


def versions() -> dict[str, str]:
    import sqlite3

    found = {name: version(name) for name in ("huey", "persist-queue", "rq", "redis")}
    found["SQLite"] = sqlite3.sqlite_version
    found["SQLite default synchronous"] = str(
        sqlite3.connect(":memory:").execute("PRAGMA synchronous").fetchone()[0]
    )
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", nargs="?")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--versions", action="store_true")
    parser.add_argument("--cap", type=float, default=None, help="a depth run: drain seconds")
    args = parser.parse_args()
    if args.versions:
        print(json.dumps(versions()))
        return
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    if args.cap is not None:
        print(json.dumps(run_capped(args.system, args.tasks, args.consumers, args.dir, args.cap)))
        return
    print(json.dumps(run(args.system, args.tasks, args.consumers, args.dir)))


if __name__ == "__main__":
    main()
