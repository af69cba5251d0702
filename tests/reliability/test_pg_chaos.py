"""The PostgreSQL side of the chaos run, on a private cluster like the run's (chaos/pgcluster.py):
a crash keeps what was committed, the checker reads F and E from the store's tables, and the
sweep loop outlives a database restart.

Skipped, saying why, on a machine without PostgreSQL's server binaries or its OS user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from chaos import checker, pgcluster
from chaos.pgcluster import PgCluster
from chaos.server import HOST, QUEUE
from queues.store import QueueSettings
from queues.store_pg import PgStoreConfig, PostgresStore
from tests.migrated import migrate

from ..children import interrupted, reaped

ROOT = Path(__file__).resolve().parent.parent.parent
T0 = 1_751_500_000_000
S = QueueSettings(lease_seconds=10)
SWEPT = "swept"


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    why = pgcluster.missing()
    if why is not None:
        pytest.skip(why)
    pg = PgCluster()
    try:
        pg.init()
        yield pg
    finally:
        pg.destroy()


def test_without_the_server_binaries_the_run_says_so_in_one_line_and_exits_2(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no initdb, no postgres, no setpriv
    argv = [sys.executable, "-m", "chaos.run", "--quick", "--store", "postgres"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "needs initdb, postgres, setpriv" in done.stderr


def test_a_committed_row_survives_a_crash_and_a_fast_stop(cluster):
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (1)")
    held = psycopg.connect(cluster.dsn, autocommit=True)  # a session the crash cuts
    port, data = cluster.port, cluster.data
    cluster.restart(crash=True, pause=0.2)
    with pytest.raises(psycopg.OperationalError):
        held.execute("SELECT 1")
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT n FROM kept").fetchall() == [(1,)]
        conn.execute("INSERT INTO kept VALUES (2)")
    cluster.restart(crash=False, pause=0.2)
    with psycopg.connect(cluster.dsn) as conn:
        assert conn.execute("SELECT n FROM kept ORDER BY n").fetchall() == [(1,), (2,)]
    assert (cluster.port, cluster.data, cluster.restarts) == (port, data, 2)


def write_producer_log(run_dir: Path, lines: list[dict]) -> None:
    (run_dir / "producers").mkdir(parents=True)
    (run_dir / "workers").mkdir()
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (run_dir / "producers" / "p0.jsonl").write_text(text)


def test_the_checker_reads_tasks_and_events_from_the_postgres_tables(cluster, tmp_path):
    store = PostgresStore(PgStoreConfig(dsn=cluster.dsn, schema="public"))
    try:

        def post(key: str, at: int) -> str:
            posted = store.post(HOST, QUEUE, {"k": key}, settings=S, posted_by="paul",
                                idempotency_key=key, now=at)  # fmt: skip
            return posted.task.id

        done, twice, lost, stray = (post(k, T0 + i) for i, k in enumerate("abcd"))
        # `done`: claimed once, finished; `twice`: its lease lapses, the sweep requeues it,
        # the second claim finishes it (an explained duplicate); `lost` stays pending
        # claims go in postedAt order: `done` first, then `twice`, then (requeued) `twice`
        for expected in (done, twice):
            [task] = store.claim(HOST, QUEUE, settings=S, worker="w1", now=T0 + 100)
            assert task.id == expected
        store.finish(HOST, QUEUE, done, settings=S, worker="w1", attempt=1,
                     result={"by": "w1", "attempt": 1}, now=T0 + 200)  # fmt: skip
        store.sweep_queue(HOST, QUEUE, S, now=T0 + 20_000)
        # a claim whose verb began before the sweep's (its `at` is earlier) and took the task
        # once the requeue had committed: the requeue still explains it, by row order
        [again] = store.claim(HOST, QUEUE, settings=S, worker="w2", now=T0 + 19_000)
        assert (again.id, again.attempts) == (twice, 2)
        store.finish(HOST, QUEUE, twice, settings=S, worker="w2", attempt=2,
                     result={"by": "w2", "attempt": 2}, now=T0 + 23_000)  # fmt: skip
    finally:
        store.close()
    acks = [("a", done), ("b", twice), ("c", lost)]  # `d` was never intended: unexpected
    write_producer_log(tmp_path, [
        *({"e": "intent", "key": k} for k, _ in acks),
        *({"e": "ack", "key": k, "id": tid, "tries": 1, "s": 201} for k, tid in acks),
    ])  # fmt: skip

    fig = checker.check(tmp_path, cluster.dsn, "th_events")

    assert (fig.tasks_in_store, fig.acked, fig.extra_copies) == (4, 3, 0)
    assert fig.lost == [lost] and sorted(fig.stuck) == sorted([lost, stray])
    assert fig.unexpected == [stray]
    assert (fig.claims, fig.explained_duplicates, fig.unexplained_duplicates) == (3, 1, [])
    assert fig.overwritten == [] and fig.replay_mismatches == 0
    assert fig.event_lines >= 9  # 4 posts, 3 claims, a requeue, 2 results
    assert checker.read_pg_store(cluster.dsn)[0][twice]["result"] == {"by": "w2", "attempt": 2}


@pytest.mark.slow
def test_the_sweep_loop_outlives_a_database_restart(cluster, tmp_path):
    """The loop says the database is unreachable (once) instead of dying, and sweeps again
    when it is back: here it requeues a lease that lapsed while it was down."""
    env = {
        "PATH": os.environ["PATH"], "DEBUG": "1", "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": cluster.dsn,
        "TASKHOSTER_ITEMS_DIR": str(tmp_path / "items"),
        "TASKHOSTER_LOGS_DIR": str(tmp_path / "logs"),
        "TASKHOSTER_FSYNC": "0", "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
        "TASKHOSTER_METRICS_DIR": "metrics",  # under var/, not in /dev/shm
    }  # fmt: skip
    manage = [sys.executable, str(ROOT / "manage.py")]
    migrate(env)
    # a queue of its own: the checker's test left tasks in the chaos queue of this cluster
    subprocess.run([*manage, "createqueue", HOST, SWEPT, "--store", "postgres",
                    "--lease-seconds", "10"], cwd=ROOT, env=env, check=True,
                   capture_output=True)  # fmt: skip
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "w") as o, open(err, "w") as e:
        loop = subprocess.Popen([*manage, "sweep", "--loop", "--interval", "0.1"], cwd=ROOT,
                                env=env, stdout=o, stderr=e, text=True)  # fmt: skip
    with reaped(loop):
        wait_for(out, "sweeping 1 configured queue")
        cluster.crash()
        wait_for(err, "the database is unreachable")
        time.sleep(1)  # more passes meet the database down: the loop lives on
        assert loop.poll() is None
        cluster.start()
        store = PostgresStore(PgStoreConfig(dsn=cluster.dsn, events_table="tasklogs_taskevent"))
        try:
            long_ago = int(time.time() * 1000) - 60_000  # its lease lapsed long ago
            store.post(HOST, SWEPT, {"n": 1}, settings=S, posted_by="paul", now=long_ago)
            assert store.claim(HOST, SWEPT, settings=S, worker="w", now=long_ago)
        finally:
            store.close()
        wait_for(out, "requeue=1")
        interrupted(loop)
    assert err.read_text().count("the database is unreachable") == 1  # said once, not per pass
    assert "Traceback" not in err.read_text()


def wait_for(path: Path, text: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path.name} after {seconds} s: {path.read_text()!r}")
