"""Task Logs lists a PostgreSQL queue's events when the store is in another database than the
console's: `ingest_tasklogs` copies the store's event rows into TaskEvent, each once, none
skipped when a row commits after a higher id, and an ingester SIGKILLed mid-way loses nothing
and stores nothing twice on the rerun."""

from __future__ import annotations

import io
import os
import re
import signal
import sqlite3
import time
from pathlib import Path

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from psycopg import sql

from queues.store import QueueSettings
from queues.store.eventlog import NO_REASON
from queues.store_pg import PgStoreConfig, PostgresStore
from queues.stores import pg_events
from tasklogs.models import IngestCursor, TaskEvent
from tasklogs.store_events import copy_store_events
from tests.migrated import migrate

from ..children import interrupted, reaped
from .conftest import manage

pytestmark = pytest.mark.django_db
HOST, QUEUE = "task.example.com", "resize"
SETTINGS = QueueSettings()
T0 = 1_751_500_000_000


@pytest.fixture
def far_store(pg_store):
    """A PostgreSQL store with its own events table (th_events), as on TASKHOSTER_PG_STORE_URL;
    in the PostgreSQL run of the suite it is in the console's database, in a schema of its own,
    which is all the copy needs to be tested there too."""
    store = PostgresStore(PgStoreConfig(dsn=pg_store.dsn, schema=pg_store.schema))
    assert store.events_table == "th_events"
    yield store
    store.close()


def lifecycle(store: PostgresStore, n: int, *, now: int = T0) -> None:
    for i in range(n):
        task = store.post(HOST, QUEUE, {"n": i}, settings=SETTINGS, posted_by="a", now=now + i)
        store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", now=now + i)
        store.finish(HOST, QUEUE, task.task.id, settings=SETTINGS, worker="box-1", attempt=1,
                     result={"ok": i}, now=now + i)  # fmt: skip


def store_rows(store: PostgresStore) -> dict[int, dict]:
    return {r["id"]: r for r in store.event_rows(after=0, upto=10**12, limit=10**6)}


FIELDS = ("t", "at", "host", "queue", "task_id", "event", "status", "attempts", "worker",
          "bytes_item", "bytes_progress", "bytes_result", "bytes_error", "archived", "by",
          "origin", "edited", "lapsed", "file")  # fmt: skip


def test_the_rows_are_copied_as_the_store_writes_them_and_once(far_store) -> None:
    lifecycle(far_store, 3)
    report = copy_store_events(far_store)
    rows = store_rows(far_store)
    assert report.store_rows == len(rows) == 9  # posted, claimed, result: three each
    copied = {e.offset: e for e in TaskEvent.objects.all()}
    assert set(copied) == set(rows)
    for row_id, row in rows.items():
        event = copied[row_id]
        assert {f: getattr(event, f) for f in FIELDS} == {f: row[f] for f in FIELDS}
        assert event.digest == 0 and event.file == "postgres"
    assert copy_store_events(far_store).store_rows == 0  # the cursor is at the end
    lifecycle(far_store, 1, now=T0 + 10)
    assert copy_store_events(far_store).store_rows == 3
    IngestCursor.objects.update(offset=0)  # another ingester read them all again
    copy_store_events(far_store)
    assert TaskEvent.objects.count() == 12


def test_a_row_that_commits_late_is_copied_and_the_cursor_waits_for_it(
    far_store, pg_store, monkeypatch
) -> None:
    monkeypatch.setattr(pg_events, "SETTLE_SECONDS", 0.2)
    lifecycle(far_store, 1)
    late = far_store.read(HOST, QUEUE, next(iter(store_rows(far_store).values()))["task_id"])
    with psycopg.connect(pg_store.dsn) as writer:
        writer.execute(
            sql.SQL("SET search_path TO {}, public").format(sql.Identifier(pg_store.schema))
        )
        far_store._writer._log(writer, [(late, "fetched", None, [], NO_REASON)], now=T0 + 5)
        lifecycle(far_store, 1, now=T0 + 10)  # higher ids, committed first
        assert copy_store_events(far_store).store_rows == 6
        assert IngestCursor.objects.get().offset == 0  # a writer is still open
        writer.commit()
    copy_store_events(far_store)
    rows = store_rows(far_store)
    assert len(rows) == 7
    assert sorted(TaskEvent.objects.values_list("offset", flat=True)) == sorted(rows)
    assert IngestCursor.objects.get().offset == max(rows)


@pytest.fixture
def sqlite_console(tmp_path: Path, pg_store) -> tuple[str, Path, dict[str, str]]:
    """A migrated SQLite console database for child processes, with a PostgreSQL queue whose
    store is the test's (in another database, as far as the children know), and their env."""
    path = tmp_path / "console.sqlite3"
    url = f"sqlite:///{path}"
    env = {"TASKHOSTER_PG_STORE_URL": pg_store.dsn, "TASKHOSTER_PG_STORE_SCHEMA": pg_store.schema,
           "TASKHOSTER_ITEMS_DIR": str(tmp_path / "items"),
           "TASKHOSTER_LOGS_DIR": str(tmp_path / "logs")}  # fmt: skip
    migrate({**os.environ, **env, "DATABASE_URL": url, "SECRET_KEY": "test-only"})
    made = manage(url, "manage.py", "createqueue", HOST, QUEUE, "--store", "postgres",
                  env_extra=env, stdout=-1)  # fmt: skip
    assert made.wait(timeout=120) == 0
    return url, path, env


def copied_offsets(path: Path) -> list[int]:
    for _ in range(200):
        try:
            with sqlite3.connect(path, timeout=5) as db:
                found = db.execute(
                    "SELECT \"offset\" FROM tasklogs_taskevent WHERE file = 'postgres'"
                ).fetchall()
            return [row[0] for row in found]
        except sqlite3.OperationalError:  # the ingester holds the write lock: look again
            time.sleep(0.01)
    raise AssertionError("the console database stayed locked")


def test_an_ingester_killed_mid_copy_loses_nothing_and_stores_nothing_twice(
    far_store, pg_store, sqlite_console, tmp_path
) -> None:
    """SIGKILL while batches are being copied: a batch's rows and its cursor's advance commit
    together, so the rerun copies exactly the rows the killed one did not."""
    total = 100_000
    with psycopg.connect(pg_store.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_store.schema)))
        conn.execute(
            "INSERT INTO th_events (t, at, host, queue, task_id, event, status, attempts,"
            " worker, bytes_item, bytes_progress, bytes_result, bytes_error, archived, file,"
            ' "offset", digest)'
            " SELECT 1751500000 + i / 1000, to_timestamp(1751500000 + i / 1000.0), %s, %s,"
            " lpad(to_hex(i), 16, '0'), 'posted', 'pending', 0, '', 12, 0, 0, 0, '',"
            " 'postgres', nextval('th_event_offsets'), 0 FROM generate_series(1, %s) AS i",
            (HOST, QUEUE, total),
        )
        ids = [r[0] for r in conn.execute("SELECT id FROM th_events ORDER BY id")]
    url, path, env = sqlite_console
    source = tmp_path / "no-day-files"
    source.mkdir()
    args = ("manage.py", "ingest_tasklogs", "--source", str(source))
    victim = manage(url, *args, env_extra=env, stdout=-1, stderr=-1)
    deadline = time.monotonic() + 120
    while not copied_offsets(path):  # the first batch is committed: the next ones are under way
        assert victim.poll() is None, "the ingester finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    assert 0 < len(copied_offsets(path)) < total  # killed part-way
    rerun = manage(url, *args, env_extra=env, stdout=-1, stderr=-1)
    out, err = rerun.communicate(timeout=180)
    assert rerun.returncode == 0, err
    found = copied_offsets(path)
    assert len(found) == len(set(found)) == total and sorted(found) == ids
    assert re.search(r"\d+ events? stored from the PostgreSQL store in ", out), out


def test_a_site_without_postgres_queues_does_not_connect_to_the_store(
    settings, day_dir, append
) -> None:
    from .conftest import line

    settings.TASKHOSTER_PG_STORE_URL = "postgresql://nobody@127.0.0.1:1/gone?connect_timeout=2"
    append("2025-01-01", line())
    err = io.StringIO()
    call_command("ingest_tasklogs", stdout=io.StringIO(), stderr=err)
    assert err.getvalue() == "" and TaskEvent.objects.count() == 1


def test_the_command_copies_them_only_from_a_store_in_another_database(
    pg_store, make_queue
) -> None:
    from queues import stores

    make_queue(HOST, QUEUE, store="postgres")
    store = stores.router().postgres
    lifecycle(store, 2)
    call_command("ingest_tasklogs")
    copied = TaskEvent.objects.filter(file="postgres").count()
    if pg_store.shares_console_db:
        # the store wrote Task Logs' rows itself (committed on its own connections): no copy
        assert not IngestCursor.objects.filter(name__startswith="postgres:").exists()
    else:
        assert copied == 6


def test_a_store_that_does_not_answer_is_said_and_the_day_files_are_ingested(
    settings, day_dir, append, make_queue
) -> None:
    from .conftest import line

    if connection.vendor == "postgresql":
        pytest.skip("on PostgreSQL the store is the console's own database: nothing to copy")
    settings.TASKHOSTER_PG_STORE_URL = "postgresql://nobody@127.0.0.1:1/gone?connect_timeout=2"
    make_queue(HOST, QUEUE, store="postgres")
    append("2025-01-01", line())
    with pytest.raises(CommandError, match="The PostgreSQL store's events were not copied"):
        call_command("ingest_tasklogs")
    assert TaskEvent.objects.count() == 1


def test_a_follower_copies_new_store_rows_as_they_come(
    far_store, pg_store, sqlite_console, tmp_path
) -> None:
    """No inotify wakes a follower for a row of the store: it looks every STORE_POLL_SECONDS."""
    url, path, env = sqlite_console
    source = tmp_path / "no-day-files"
    source.mkdir()
    follower = manage(url, "manage.py", "ingest_tasklogs", "--follow", "--source", str(source),
                      env_extra=env, stdout=-1, stderr=-1)  # fmt: skip
    with reaped(follower):
        for n in (1, 2):
            lifecycle(far_store, 1, now=T0 + 10 * n)
            deadline = time.monotonic() + 60
            while len(copied_offsets(path)) < 3 * n:
                assert follower.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        _, err = interrupted(follower)
    assert follower.returncode == 0, err
    assert sorted(copied_offsets(path)) == sorted(store_rows(far_store))
