"""Peers benchmark: the taskhoster store beside the queues a user would pick instead, on the
same work: N no-op tasks posted, then drained by 1 and 2 consumer processes that acknowledge
each. Medians of --runs runs, with min and max. The store runs one at a time (post, claim,
finish) and in batches of 100 (post_many, claim max 100, finish_many), fsync off, and durable
by per-file fsync or by syncfs (TASKHOSTER_FLUSH); each batched row is read beside the
one-at-a-time row of the same durability, in the same run. The systems take turns, run after
run (run 1 of every system, then run 2, ...), and each "vs" is the median of the run-by-run
ratios, so a noisy machine's slow minute falls on both sides of a comparison.

    .venv/bin/python bench/peers_bench.py [--quick] [--tasks 10000] [--runs 3] [--json FILE]

The peers (huey, persist-queue, RQ with redis-py) are installed into a throw-away environment,
var/bench-peers-venv, made on the first run with `python -m venv` and pip; the project does
not depend on them. Each peer's run is bench/peers/drain.py under that interpreter; the store's
runs are in this process's interpreter, with the lifecycle pieces of bench/store_bench.py.
--quick: 1,000 tasks and 1 run, for `make bench QUICK=1`.

The depth runs follow (--depths, --skip-depths): FileHuey beside the store, one at a time with
fsync off (FileHuey has no fsync option) and on, with 1,000, 10,000 and 100,000 tasks queued,
drained by 1 and 2 consumers for at most --depth-cap seconds each; a run stopped by the cap gives
its rate over the tasks taken, and says so. --quick runs the depth of 1,000 only.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from results import PEERS, depth_table, peers_table  # noqa: E402
from store_bench import HOST, QUEUE, S, make_store  # noqa: E402

from queues.store import PostEntry, Report, Reported  # noqa: E402

PEERS_VENV = ROOT / "var" / "bench-peers-venv"
FILE_HUEY_MAX = 2_000  # FileHuey lists its directory on every dequeue: it slows with depth


@dataclass(frozen=True)
class System:
    key: str  # drain.py's name, or taskhoster-[batch-]fsync-on|fsync-off|syncfs
    label: str
    flushes: str  # whether (and how) an acknowledged post or ack is on disk
    where: str  # in-process (a library on local files) or a server
    multi_process: bool = True  # made for several consumer processes on one queue
    baseline: str = ""  # the taskhoster row it is read beside
    consumers: tuple[int, ...] = (1, 2)  # the consumer counts it drains with


BATCH = 100  # the batched rows: posts of 100, claims of max 100, batch finishes of 100

SYSTEMS = (
    System("taskhoster-fsync-off", "taskhoster store, fsync off", "no", "in-process"),
    System("taskhoster-fsync-on", "taskhoster store, fsync on", "yes (fsync)", "in-process"),
    System("taskhoster-batch-fsync-off", f"taskhoster store, batches of {BATCH}, fsync off",
           "no", "in-process", baseline="taskhoster-fsync-off"),
    System("taskhoster-batch-fsync-on", f"taskhoster store, batches of {BATCH}, fsync on",
           "yes (fsync, shared per batch)", "in-process", baseline="taskhoster-fsync-on"),
    System("taskhoster-syncfs", "taskhoster store, syncfs", "yes (syncfs)", "in-process",
           baseline="taskhoster-fsync-on"),
    System("taskhoster-batch-syncfs", f"taskhoster store, batches of {BATCH}, syncfs",
           "yes (syncfs, shared per batch)", "in-process", baseline="taskhoster-batch-fsync-on"),
    System("huey-sqlite", "huey SqliteHuey, fsync=False", "no (synchronous=OFF)", "in-process",
           baseline="taskhoster-fsync-off"),
    System("huey-sqlite-fsync", "huey SqliteHuey, fsync=True", "yes (synchronous=FULL)",
           "in-process", baseline="taskhoster-fsync-on", consumers=(1, 2, 4)),
    System("huey-file", "huey FileHuey", "no (no fsync option)", "in-process",
           baseline="taskhoster-fsync-off"),
    System("pq-sqlite", "persist-queue SQLiteAckQueue", "yes (SQLite default, WAL)",
           "in-process", baseline="taskhoster-fsync-on"),
    System("pq-file", "persist-queue Queue (files)", "partly (fsync per 100 puts, not acks)",
           "in-process", multi_process=False, baseline="taskhoster-fsync-off"),
    System("rq", "RQ SimpleWorker on Redis", "per Redis config (see below)",
           "server (Redis, TCP)", baseline="taskhoster-fsync-off"),
    # The PostgreSQL store, read beside SqliteHuey with fsync on (issue 13's targets): each
    # commit waits for its WAL flush (synchronous_commit on), as each SqliteHuey write waits
    # for its fsync. Runs in this interpreter, like the file store (drain.py's interpreter has
    # the peers, not the project).
    System("taskhoster-pg", "taskhoster PostgreSQL store", "yes (WAL flush per commit)",
           "server (PostgreSQL, TCP)", baseline="huey-sqlite-fsync", consumers=(1, 2, 4)),
    System("taskhoster-pg-batch", f"taskhoster PostgreSQL store, batches of {BATCH}",
           "yes (WAL flush per commit)", "server (PostgreSQL, TCP)",
           baseline="huey-sqlite-fsync", consumers=(1, 2, 4)),
    # The floor under the one-at-a-time row: the same round trips and durable commits a task
    # costs the store (a claim: a locking read, then its write and COMMIT; a finish: the
    # same), in bare SQL on a one-table queue, with no event rows, no NOTIFY, no Python rules.
    System("taskhoster-pg-floor", "PostgreSQL floor: bare SQL, 2 durable commits a task",
           "yes (WAL flush per commit)", "server (PostgreSQL, TCP)",
           baseline="huey-sqlite-fsync", consumers=(1, 2, 4)),
)  # fmt: skip


@dataclass
class Result:
    system: str
    consumers: int
    tasks: int
    drain: list[float]  # tasks/s of each run
    post: list[float]
    duplicates: int = 0


# --- the taskhoster store, in this process's interpreter -------------------------------------


def durability(key: str) -> tuple[bool, str]:
    """A taskhoster system's (fsync, flush) from its key."""
    if key.endswith("syncfs"):
        return True, "syncfs"
    return key.endswith("on"), "fsync"


Durable = tuple[bool, str]  # StoreConfig's (fsync, flush)


def _consume(root: str, durable: Durable, worker: str, start: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    store = make_store(Path(root), *durable)
    start.wait()
    done = 0
    while tasks := store.claim(HOST, QUEUE, settings=S, worker=worker):
        for task in tasks:
            store.finish(HOST, QUEUE, task.id, settings=S, worker=worker,
                         attempt=task.attempts, result=None)  # fmt: skip
            done += 1
    store.close()
    out.put(done)


def _consume_batches(
    root: str,
    durable: Durable,
    worker: str,
    start: mp.Event,
    out: mp.Queue,  # type: ignore[type-arg]
) -> None:
    """claim max BATCH, then one batch finish for them all, until the queue is empty."""
    store = make_store(Path(root), *durable)
    start.wait()
    done = 0
    while tasks := store.claim(HOST, QUEUE, settings=S, worker=worker, max_tasks=BATCH):
        reports = [Report(task_id=t.id, attempt=t.attempts, outcome="result") for t in tasks]
        answers = store.finish_many(HOST, QUEUE, reports, settings=S, worker=worker)
        done += sum(1 for a in answers if isinstance(a, Reported))
    store.close()
    out.put(done)


def timed_drain(target: Any, args_of: Any, consumers: int, *, warmup: float) -> tuple[int, float]:
    """Start `consumers` spawned processes of `target(*args_of(i), start, out)`, give them
    `warmup` seconds to import and connect (not timed), then time them from the start signal
    until each has put its count of tasks drained: (tasks drained, seconds)."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_of(i), start, out)) for i in range(consumers)]
    for p in procs:
        p.start()
    time.sleep(warmup)
    started = time.perf_counter()
    start.set()
    drained = sum(out.get() for _ in procs)
    drain_s = time.perf_counter() - started
    for p in procs:
        p.join()
    return drained, drain_s


def taskhoster_run(
    durable: tuple[bool, str], n: int, consumers: int, root: Path, *, batched: bool = False
) -> dict[str, float]:
    store = make_store(root, *durable)
    started = time.perf_counter()
    if batched:
        for first in range(0, n, BATCH):
            entries = [PostEntry(item={"n": 1}) for _ in range(min(BATCH, n - first))]
            store.post_many(HOST, QUEUE, entries, settings=S, posted_by="bench")
    else:
        for _ in range(n):
            store.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="bench")
    post_s = time.perf_counter() - started
    store.close()
    consume = _consume_batches if batched else _consume
    # every consumer imports the store in its warm-up
    drained, drain_s = timed_drain(consume, lambda i: (str(root), durable, f"w{i}"), consumers,
                                   warmup=1.0)  # fmt: skip
    assert drained == n, (drained, n)
    return {"post": n / post_s, "drain": n / drain_s, "duplicates": 0}


# --- the depth runs: the queue filled to a depth, then drained for at most a time cap -------

DEPTHS = (1_000, 10_000, 100_000)
QUICK_DEPTHS = (1_000,)
DEPTH_CAP_S = 20.0  # --quick: QUICK_DEPTH_CAP_S
QUICK_DEPTH_CAP_S = 10.0
DEPTH_SYSTEMS = ("taskhoster-fsync-off", "taskhoster-fsync-on", "huey-file")


@dataclass
class DepthResult:
    system: str
    depth: int
    consumers: int
    cap: float
    drain: list[float]  # tasks/s of each run
    drained: list[int]  # tasks taken in each run: fewer than depth when the cap stopped it
    seconds: list[float]  # each run's drain time


def _consume_until(
    root: str, fsync: bool, worker: str, cap: float, start: mp.Event, out: mp.Queue
) -> None:  # type: ignore[type-arg]
    store = make_store(Path(root), fsync)
    start.wait()
    deadline = time.monotonic() + cap
    done = 0
    while time.monotonic() < deadline and (
        tasks := store.claim(HOST, QUEUE, settings=S, worker=worker)
    ):
        for task in tasks:
            store.finish(HOST, QUEUE, task.id, settings=S, worker=worker,
                         attempt=task.attempts, result=None)  # fmt: skip
            done += 1
    store.close()
    out.put(done)


def taskhoster_depth_run(
    fsync: bool, depth: int, consumers: int, root: Path, cap: float
) -> dict[str, float]:
    """`depth` tasks posted in batches (the fill, not timed), then drained one at a time by
    `consumers` processes for at most `cap` seconds. Each consumer's first claim learns the
    queue (the index load of a fresh process): it is inside the timed drain."""
    store = make_store(root, fsync)
    for first in range(0, depth, BATCH):
        entries = [PostEntry(item={"n": 1}) for _ in range(min(BATCH, depth - first))]
        store.post_many(HOST, QUEUE, entries, settings=S, posted_by="bench")
    store.close()
    drained, drain_s = timed_drain(_consume_until, lambda i: (str(root), fsync, f"w{i}", cap),
                                   consumers, warmup=1.0)  # fmt: skip
    assert drained <= depth, (drained, depth)
    return {"drain": drained / drain_s, "drained": drained, "seconds": drain_s}


def peer_depth_run(
    python: Path, system: str, depth: int, consumers: int, root: Path, cap: float
) -> dict[str, float]:
    command = [str(python), str(HERE / "peers" / "drain.py"), system, "--tasks", str(depth),
               "--consumers", str(consumers), "--dir", str(root), "--cap", str(cap)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode:
        sys.exit(f"{system} at depth {depth} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def depth_runs(
    python: Path, depths: tuple[int, ...], runs: int, cap: float, tmp: Path
) -> list[DepthResult]:
    results = []
    for depth in depths:
        for key in DEPTH_SYSTEMS:
            for consumers in (1, 2):
                result = DepthResult(key, depth, consumers, cap, [], [], [])
                for run in range(runs):
                    root = tmp / f"depth-{key}-{depth}-{consumers}-{run}"
                    if key.startswith("taskhoster"):
                        got = taskhoster_depth_run(key.endswith("on"), depth, consumers, root, cap)
                    else:
                        got = peer_depth_run(python, key, depth, consumers, root, cap)
                    result.drain.append(got["drain"])
                    result.drained.append(int(got["drained"]))
                    result.seconds.append(got["seconds"])
                    # Now, untimed: a deep queue's files take a while to delete.
                    shutil.rmtree(root, ignore_errors=True)
                results.append(result)
                print(f"depth {depth:,}, {key}, {consumers} consumer(s): drain median "
                      f"{statistics.median(result.drain):,.0f}/s, taken "
                      f"{min(result.drained):,}-{max(result.drained):,}", flush=True)  # fmt: skip
    return results


# --- the PostgreSQL store, in this process's interpreter, on its own database ----------------


def _pg_consume(config: Any, batched: bool, worker: str, start: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from queues.store_pg import PostgresStore

    store = PostgresStore(config)
    start.wait()
    done = 0
    while tasks := store.claim(HOST, QUEUE, settings=S, worker=worker,
                               max_tasks=BATCH if batched else 1):  # fmt: skip
        if batched:
            reports = [Report(task_id=t.id, attempt=t.attempts, outcome="result") for t in tasks]
            answers = store.finish_many(HOST, QUEUE, reports, settings=S, worker=worker)
            done += sum(1 for a in answers if isinstance(a, Reported))
            continue
        for task in tasks:
            store.finish(HOST, QUEUE, task.id, settings=S, worker=worker,
                         attempt=task.attempts, result=None)  # fmt: skip
            done += 1
    store.close()
    out.put(done)


def pg_run(dsn: str, n: int, consumers: int, *, batched: bool) -> dict[str, float]:
    """Post n tasks (one at a time or in batches), drain them with `consumers` processes, in
    a schema of this run's own (dropped afterwards)."""
    import psycopg
    from psycopg import sql

    from queues.store_pg import PgStoreConfig, PostgresStore

    config = PgStoreConfig(dsn=dsn, schema=f"peers_{os.getpid()}_{time.monotonic_ns()}")
    store = PostgresStore(config)
    try:
        started = time.perf_counter()
        if batched:
            for first in range(0, n, BATCH):
                entries = [PostEntry(item={"n": 1}) for _ in range(min(BATCH, n - first))]
                store.post_many(HOST, QUEUE, entries, settings=S, posted_by="bench")
        else:
            for _ in range(n):
                store.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="bench")
        post_s = time.perf_counter() - started
        # every consumer imports the store and opens its tables in its warm-up
        drained, drain_s = timed_drain(_pg_consume, lambda i: (config, batched, f"w{i}"),
                                       consumers, warmup=1.5)  # fmt: skip
        assert drained == n, (drained, n)
        claims = store.stats(HOST, QUEUE)
        assert claims.done == n and claims.pending == claims.processing == 0, claims
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(config.schema)))
    return {"post": n / post_s, "drain": n / drain_s, "duplicates": 0}


_FLOOR_CLAIM = (
    "SELECT id FROM floor_tasks WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def _pg_floor_consume(dsn: str, start: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import psycopg

    done = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        start.wait()
        while True:
            with conn.pipeline(), conn.transaction():
                row = conn.execute(_FLOOR_CLAIM).fetchone()
                if row is None:
                    break
                conn.execute("UPDATE floor_tasks SET status = 'processing' WHERE id = %s", row)
            with conn.pipeline(), conn.transaction():
                conn.execute("SELECT status FROM floor_tasks WHERE id = %s FOR UPDATE", row)
                conn.execute("UPDATE floor_tasks SET status = 'done' WHERE id = %s", row)
            done += 1
    out.put(done)


def pg_floor_run(dsn: str, n: int, consumers: int) -> dict[str, float]:
    """n rows drained one at a time by `consumers` processes in bare SQL (see the system)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS floor_tasks")
        conn.execute("CREATE TABLE floor_tasks (id bigint PRIMARY KEY, status text NOT NULL,"
                     " record json NOT NULL)")  # fmt: skip
        started = time.perf_counter()
        conn.execute("INSERT INTO floor_tasks SELECT i, 'pending', '{\"n\": 1}'"
                     " FROM generate_series(1, %s) AS i", (n,))  # fmt: skip
        post_s = time.perf_counter() - started
        conn.execute("ANALYZE floor_tasks")
    drained, drain_s = timed_drain(_pg_floor_consume, lambda i: (dsn,), consumers, warmup=1.5)
    assert drained == n, (drained, n)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE floor_tasks")
    return {"post": n / post_s, "drain": n / drain_s, "duplicates": 0}


def pg_database(server: str, name: str) -> str | None:
    """A fresh database `name` on `server` (made again if a run left it); None, saying why,
    when no server answers."""
    import psycopg
    from psycopg import conninfo, sql

    try:
        with psycopg.connect(server, autocommit=True, connect_timeout=3) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))  # fmt: skip
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        print(f"PostgreSQL store rows left out: no server at {server} ({exc})", flush=True)
        return None
    return conninfo.make_conninfo(server, dbname=name)


def drop_pg_database(server: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))  # fmt: skip


def pg_settings(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn) as conn:
        shown = []
        for name in ("fsync", "synchronous_commit", "wal_sync_method", "server_version"):
            value = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
            shown.append(f"{name}={value[0] if value else '?'}")
    return ", ".join(shown)


# --- the peers, in their own interpreter -----------------------------------------------------


def peers_python() -> Path:
    python = PEERS_VENV / "bin" / "python"
    if not python.exists():
        print(f"making {PEERS_VENV.relative_to(ROOT)} with {' '.join(PEERS)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEERS], check=True)
    return python


def peer_run(python: Path, system: str, n: int, consumers: int, root: Path) -> dict[str, float]:
    command = [str(python), str(HERE / "peers" / "drain.py"), system, "--tasks", str(n),
               "--consumers", str(consumers), "--dir", str(root)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode:
        sys.exit(f"{system} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def peer_versions(python: Path) -> dict[str, str]:
    done = subprocess.run([str(python), str(HERE / "peers" / "drain.py"), "--versions"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout)


def redis_persistence() -> str:
    """Whether the local Redis writes to disk at all: its AOF and RDB settings."""
    try:
        found = {}
        for key in ("appendonly", "appendfsync", "save"):
            command = ["redis-cli", "-h", "127.0.0.1", "config", "get", key]
            out = subprocess.run(command, capture_output=True, text=True, timeout=5)
            value = out.stdout.split("\n")
            found[key] = value[1] if len(value) > 1 else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (redis-cli not found)"
    return (f"appendonly={found['appendonly']}, appendfsync={found['appendfsync']}, "
            f"save='{found['save']}'")  # fmt: skip


# --- the run ---------------------------------------------------------------------------------


def _tasks(system: System, n: int) -> int:
    return min(n, FILE_HUEY_MAX) if system.key == "huey-file" else n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 tasks, 1 run")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    parser.add_argument("--pg-server", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a PostgreSQL server where CREATE DATABASE is allowed")  # fmt: skip
    parser.add_argument("--pg-db", default="taskhoster_bench_peers",
                        help="the PostgreSQL store's throw-away database")  # fmt: skip
    parser.add_argument(
        "--systems",
        default=None,
        help="comma-separated keys to run (default: all), e.g. "
        "taskhoster-fsync-on,taskhoster-batch-fsync-on,huey-sqlite-fsync",
    )
    parser.add_argument("--depths", default=None,
                        help="comma-separated depths for the depth runs (default 1000,10000,100000;"
                        " --quick: 1000)")  # fmt: skip
    parser.add_argument("--depth-cap", type=float, default=None,
                        help=f"seconds a depth run's drain may take at most (default "
                        f"{DEPTH_CAP_S:g}; --quick: {QUICK_DEPTH_CAP_S:g})")  # fmt: skip
    parser.add_argument("--depth-runs", type=int, default=None, help="default: --runs")
    parser.add_argument("--skip-depths", action="store_true", help="no depth runs")
    parser.add_argument("--skip-peers", action="store_true", help="the depth runs only")
    args = parser.parse_args()
    chosen = set(args.systems.split(",")) if args.systems else {s.key for s in SYSTEMS}
    unknown = chosen - {s.key for s in SYSTEMS}
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    systems = () if args.skip_peers else tuple(s for s in SYSTEMS if s.key in chosen)
    n = args.tasks or (1_000 if args.quick else 10_000)
    runs = args.runs or (1 if args.quick else 3)
    print("$ " + " ".join([".venv/bin/python", "bench/peers_bench.py", *sys.argv[1:]]), flush=True)
    python = peers_python()
    results: list[Result] = []
    started = time.monotonic()
    pg_dsn = None
    if any(s.key.startswith("taskhoster-pg") for s in systems):
        pg_dsn = pg_database(args.pg_server, args.pg_db)
        if pg_dsn is None:
            systems = tuple(s for s in systems if not s.key.startswith("taskhoster-pg"))
    postgres = pg_settings(pg_dsn) if pg_dsn else ""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        cells = [
            (system, consumers, Result(system.key, consumers, _tasks(system, n), [], []))
            for system in systems
            for consumers in (system.consumers if system.multi_process else (1,))
        ]
        for run in range(runs):  # the systems take turns, run after run
            for system, consumers, result in cells:
                tasks = result.tasks
                root = Path(tmp) / f"{system.key}-{consumers}-{run}"
                if system.key == "taskhoster-pg-floor":
                    assert pg_dsn is not None
                    got = pg_floor_run(pg_dsn, tasks, consumers)
                elif system.key.startswith("taskhoster-pg"):
                    assert pg_dsn is not None
                    got = pg_run(pg_dsn, tasks, consumers, batched="batch" in system.key)
                elif system.key.startswith("taskhoster"):
                    got = taskhoster_run(durability(system.key), tasks, consumers, root,
                                         batched="batch" in system.key)  # fmt: skip
                else:
                    got = peer_run(python, system.key, tasks, consumers, root)
                result.drain.append(got["drain"])
                result.post.append(got["post"])
                result.duplicates += int(got["duplicates"])
                print(f"run {run + 1}: {system.label}, {consumers} consumer(s): drain "
                      f"{got['drain']:,.0f}/s", flush=True)  # fmt: skip
        results = [result for _, _, result in cells]
        depths: tuple[int, ...] = ()
        if not args.skip_depths:
            depths = (tuple(int(d) for d in args.depths.split(",")) if args.depths
                      else QUICK_DEPTHS if args.quick else DEPTHS)  # fmt: skip
            cap = args.depth_cap or (QUICK_DEPTH_CAP_S if args.quick else DEPTH_CAP_S)
            depth_results = depth_runs(python, depths, args.depth_runs or runs, cap, Path(tmp))
    report = {
        "tasks": n,
        "runs": runs,
        "seconds": time.monotonic() - started,
        "versions": peer_versions(python),
        "redis": redis_persistence(),
        "postgres": postgres,
        "systems": [asdict(s) for s in systems],
        "results": [asdict(r) for r in results],
        "load": os.getloadavg()[0],
        "alternated": True,  # each "vs" is the median of the run-by-run ratios
    }
    if depths:
        report["depths"] = {
            "depths": list(depths),
            "skipped": [d for d in DEPTHS if d not in depths],
            "runs": args.depth_runs or runs,
            "cap": cap,
            "results": [asdict(r) for r in depth_results],
        }
    if pg_dsn is not None:
        drop_pg_database(args.pg_server, args.pg_db)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    if report["results"]:
        print(peers_table(report))
    if depths:
        print(depth_table(report))


if __name__ == "__main__":
    main()
