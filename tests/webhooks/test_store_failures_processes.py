"""Failure notifications of a PostgreSQL queue with real sweep processes: two sweeps at once,
and a sweep SIGKILLed mid-way then run again, make one notification per failure row, none
missing. The console is a SQLite file the children share; the store's rows are PostgreSQL's."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from queues.store_pg import PgStoreConfig, PostgresStore
from tests.migrated import migrate
from tests.tasklogs.conftest import manage

pytestmark = pytest.mark.django_db
HOST, QUEUE = "task.example.com", "resize"
FAILURES = 2_000  # four batches of 500


@pytest.fixture
def console(tmp_path: Path, pg_store) -> tuple[str, Path, dict[str, str]]:
    """A migrated SQLite console with a PostgreSQL queue hooked to a closed loopback port (the
    sends fail at once; what is counted is the notifications made), and the store's rows."""
    path = tmp_path / "console.sqlite3"
    url = f"sqlite:///{path}"
    env = {"TASKHOSTER_PG_STORE_URL": pg_store.dsn, "TASKHOSTER_PG_STORE_SCHEMA": pg_store.schema,
           "TASKHOSTER_ITEMS_DIR": str(tmp_path / "items"),
           "TASKHOSTER_LOGS_DIR": str(tmp_path / "logs"),
           "TASKHOSTER_WEBHOOK_ALLOW_PRIVATE": "1"}  # fmt: skip
    migrate({**os.environ, **env, "DATABASE_URL": url, "SECRET_KEY": "test-only"})
    made = manage(url, "manage.py", "createqueue", HOST, QUEUE, "--store", "postgres",
                  env_extra=env, stdout=-1)  # fmt: skip
    assert made.wait(timeout=120) == 0
    PostgresStore(PgStoreConfig(dsn=pg_store.dsn, schema=pg_store.schema)).close()  # its tables
    with sqlite3.connect(path) as db:
        (queue_id,) = db.execute("SELECT id FROM queues_queue").fetchone()
        db.execute(
            "INSERT INTO webhooks_webhook (queue_id, url, secret, notify_failed,"
            " pending_threshold, pending_alerted, created_at)"
            " VALUES (?, 'http://127.0.0.1:9/hook', 's3cret', 1, 0, 0, '2000-01-01 00:00:00')",
            (queue_id,),
        )
    with psycopg.connect(pg_store.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_store.schema)))
        conn.execute(
            "INSERT INTO th_events (t, at, host, queue, task_id, event, status, attempts,"
            " worker, bytes_item, bytes_progress, bytes_result, bytes_error, archived, file,"
            ' "offset", digest)'
            " SELECT 1751500000, to_timestamp(1751500000 + i / 1000.0), %s, %s,"
            " lpad(to_hex(i), 16, '0'), CASE WHEN i %% 2 = 0 THEN 'failed' ELSE 'timeout' END,"
            " 'failed', 1, '', 12, 0, 0, 0, '', 'postgres', nextval('th_event_offsets'), 0"
            " FROM generate_series(1, %s) AS i",
            (HOST, QUEUE, FAILURES),
        )
    return url, path, env


def notified(path: Path) -> list[str]:
    for _ in range(500):
        try:
            with sqlite3.connect(path, timeout=5) as db:
                return [r[0] for r in db.execute("SELECT source FROM webhooks_notification")]
        except sqlite3.OperationalError:  # a sweep holds the write lock: look again
            time.sleep(0.01)
    raise AssertionError("the console database stayed locked")


def test_two_sweeps_at_once_notify_each_failure_once(console) -> None:
    url, path, env = console
    sweeps = [manage(url, "manage.py", "sweep", env_extra=env, stdout=-1, stderr=-1)
              for _ in range(2)]  # fmt: skip
    for sweep in sweeps:
        _, err = sweep.communicate(timeout=300)
        assert sweep.returncode == 0, err
    sources = notified(path)
    assert len(sources) == len(set(sources)) == FAILURES


def test_a_sweep_killed_mid_way_then_run_again_notifies_each_failure_once(console) -> None:
    url, path, env = console
    victim = manage(url, "manage.py", "sweep", env_extra=env, stdout=-1, stderr=-1)
    deadline = time.monotonic() + 120
    while not notified(path):  # a batch is committed: the next ones are under way
        assert victim.poll() is None, "the sweep finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    assert 0 < len(notified(path)) < FAILURES  # killed part-way
    rerun = manage(url, "manage.py", "sweep", env_extra=env, stdout=-1, stderr=-1)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    sources = notified(path)
    assert len(sources) == len(set(sources)) == FAILURES
