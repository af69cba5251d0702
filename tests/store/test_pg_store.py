"""What only the PostgreSQL store has to prove: claims racing from real processes, a claimer
SIGKILLed mid-claim, sweeps side by side, its tables opened at once, its event rows in Task
Logs' columns, and the refusal when the database is not there. (Its contract is the shared
suite's: test_contract.py and the rest run on both stores.)"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from queues.store import QueueSettings, StorageUnavailable, sweep_queue
from queues.store_pg import PgStoreConfig, PostgresStore

from . import pg, procs
from .conftest import HOST, QUEUE, SETTINGS, T0

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ph():
    harness = pg.PgHarness()
    yield harness
    harness.drop()


def _post(ph, n: int, settings: QueueSettings = SETTINGS) -> list[str]:
    ids = []
    for start in range(0, n, 100):
        entries = [procs_entry(i) for i in range(start, min(n, start + 100))]
        posted = ph.store.post_many(HOST, QUEUE, entries, settings=settings, posted_by="a")
        ids += [p.task.id for p in posted]
    return ids


def procs_entry(i: int):
    from queues.store import PostEntry

    return PostEntry(item={"n": i})


@pytest.mark.slow
def test_processes_claiming_at_once_take_every_task_exactly_once(ph):
    posted = set(_post(ph, 400, procs.LONG))
    ctx = mp.get_context("spawn")
    out, ready, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [
        ctx.Process(target=procs.pg_claimer, args=(ph.opener(), f"w{n}", out, ready, start))
        for n in range(6)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.get(timeout=60)
    start.set()
    reports = [out.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    assert all(errors == [] for _, _, errors in reports)
    claims = Counter(task_id for _, got, _ in reports for task_id in got)
    assert set(claims) == posted and set(claims.values()) == {1}
    assert sum(1 for _, got, _ in reports if got) > 1  # the claims did race
    claimed_lines = [e for e in ph.events() if e["event"] == "claimed"]
    assert len(claimed_lines) == len(posted)


@pytest.mark.slow
def test_a_claimer_killed_mid_claim_loses_no_task(ph):
    posted = set(_post(ph, 300))
    ctx = mp.get_context("spawn")
    claimed = ctx.Queue()
    doomed = ctx.Process(target=procs.pg_endless_claimer, args=(ph.opener(), claimed))
    doomed.start()
    seen = {claimed.get(timeout=60) for _ in range(10)}  # it is claiming, over and over
    os.kill(doomed.pid, signal.SIGKILL)  # most likely inside a claim's transaction
    doomed.join(30)
    while not claimed.empty():
        seen.add(claimed.get())
    # what it held lapses after its one-second leases; the sweep puts it back
    later = int(time.time() * 1000) + 5_000
    report = sweep_queue(ph.store, HOST, QUEUE, SETTINGS, now=later)
    assert report.requeue >= len(seen) > 0
    taken: set[str] = set()
    while tasks := ph.store.claim(HOST, QUEUE, settings=SETTINGS, worker="heir", max_tasks=100,
                                  now=later + 1):  # fmt: skip
        taken |= {t.id for t in tasks}
    assert taken == posted  # none lost, none stuck in processing, none half-claimed
    assert ph.store.stats(HOST, QUEUE, now=later + 2).processing == len(posted)


def test_two_sweeps_at_once_act_on_each_lapsed_task_once(ph):
    ids = _post(ph, 240)
    while ph.store.claim(HOST, QUEUE, settings=SETTINGS, worker="w", max_tasks=100, now=T0):
        pass
    second = PostgresStore(ph.config)  # another process's store: its own connections
    reports = []
    start = threading.Barrier(2)

    def sweep(store) -> None:
        start.wait()
        reports.append(sweep_queue(store, HOST, QUEUE, SETTINGS, now=T0 + 61_000))

    threads = [threading.Thread(target=sweep, args=(s,)) for s in (ph.store, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    second.close()
    assert sum(r.requeue for r in reports) == len(ids)
    requeues = Counter(e["id"] for e in ph.events() if e["event"] == "requeue")
    assert set(requeues) == set(ids) and set(requeues.values()) == {1}


def test_two_stores_opening_a_new_schema_at_once_both_open():
    config = pg.fresh_config()
    opened, failed = [], []
    start = threading.Barrier(4)

    def open_store() -> None:
        start.wait()
        try:
            opened.append(PostgresStore(config))
        except Exception as exc:  # the test fails on any error
            failed.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failed == [] and len(opened) == 4
    task = opened[0].post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by=None, now=T0)
    assert opened[3].read(HOST, QUEUE, task.task.id) == task.task
    for store in opened:
        store.close()
    harness = pg.PgHarness(config)
    harness.drop()


def test_event_rows_have_task_logs_columns_and_unique_lines(ph):
    from tasklogs.models import TaskEvent

    task = ph.post()
    ph.claim()
    with ph._conn() as conn:
        columns = {
            row["column_name"]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = %s",
                (ph.config.schema, ph.config.events_table),
            )
        }
        found = conn.execute(
            sql.SQL('SELECT file, "offset", digest FROM {} ORDER BY id').format(
                sql.Identifier(ph.config.events_table)
            )
        ).fetchall()
    assert columns == {field.column for field in TaskEvent._meta.concrete_fields}
    assert [row["file"] for row in found] == ["postgres", "postgres"]
    assert len({row["offset"] for row in found}) == 2 and {row["digest"] for row in found} == {0}
    [(first_id, line), _] = ph.store.events_since(HOST, QUEUE, 0)
    assert line == ph.events(task.id)[0] and ph.store.events_since(HOST, QUEUE, first_id + 1) == []


def test_an_events_table_made_before_failure_reasons_gets_the_column_on_open(ph):
    """Issue 36: a store's own th_events made by a release before `reason` is added to on
    open, and the next failure's row keeps its line."""
    table = sql.Identifier(ph.config.schema, ph.config.events_table)
    with ph._conn() as conn:
        conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN reason").format(table))
    ph.reopen()
    task = ph.post()
    ph.claim()
    ph.store.fail(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1,
                  result={"error": "ValueError: no\nmore"})  # fmt: skip
    assert ph.events(task.id)[-1]["reason"] == "ValueError: no"


def test_an_item_with_a_nul_character_keeps_it(ph):
    task = ph.post({"s": "a\u0000b"})
    assert ph.store.read(HOST, QUEUE, task.id).item == {"s": "a\u0000b"}


def test_an_archived_payload_is_read_back_by_its_file_name(ph):
    archiving = replace(SETTINGS, archive_payloads=True)
    task = ph.post({"url": "u"}, settings=archiving)
    assert ph.store.has_archived_item(HOST, QUEUE, task.id)
    assert ph.store.archived_payload(HOST, QUEUE, task.id, "item.json") == b'{"url":"u"}'
    assert ph.store.archived_payload(HOST, QUEUE, task.id, "1-result.result.json") is None
    assert not ph.store.has_archived_item(HOST, QUEUE, ph.post().id)


def test_no_database_is_refused_as_storage_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = PgStoreConfig(dsn=f"postgresql://postgres@127.0.0.1:{port}/none?connect_timeout=2")
    with pytest.raises(StorageUnavailable) as refused:
        PostgresStore(config)
    assert refused.value.code == "storage_unavailable"


def _end_the_stores_connections(ph) -> None:
    """The server ends every connection of the store's, as a restart does, and they are gone."""
    with ph._conn() as conn:
        ended = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchall()
        for row in ended:  # with a timeout, it returns once the backend has exited
            conn.execute("SELECT pg_terminate_backend(%s, 10000)", (row["pid"],))


def test_an_idle_connection_the_server_ended_is_replaced_before_it_is_lent(ph):
    """After a database restart, no verb is refused for a pooled connection that died idle."""
    task = ph.post()
    _end_the_stores_connections(ph)
    assert ph.store.read(HOST, QUEUE, task.id) == task  # a fresh connection took its place
    assert ph.store.read(HOST, QUEUE, task.id) == task


def test_a_connection_dropped_while_in_use_is_refused_once_then_replaced(ph):
    task = ph.post()
    with pytest.raises(StorageUnavailable) as refused, ph.store._pool.connection() as conn:
        _end_the_stores_connections(ph)  # a restart in the middle of a verb
        conn.execute("SELECT 1")
    assert refused.value.code == "storage_unavailable"
    assert ph.store.read(HOST, QUEUE, task.id) == task  # a fresh connection took its place


def test_pooled_connections_the_server_dropped_cost_one_refusal_at_most(ph):
    """Every pooled connection ended at once (a restart, a failover): the first call that meets
    a dead one is refused, and the pool lets go of the others with it, so the next call works
    (not one refusal per connection the pool held)."""
    task = ph.post()
    held = [ph.store._pool.connection() for _ in range(4)]
    for borrowed in held:  # four connections open at once, then all back in the pool
        borrowed.__enter__().execute("SELECT 1")
    for borrowed in held:
        borrowed.__exit__(None, None, None)
    with ph._conn() as conn:
        ended = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert ended["n"] >= 4
    refusals = 0
    for n in range(4):
        try:
            ph.store.post(HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="a")
            ph.store.read(HOST, QUEUE, task.id)
        except StorageUnavailable:
            refusals += 1
    assert refusals <= 1


def _ids_of(ph, *task_ids: str) -> list[int]:
    """The event row ids of these tasks' events, in id order."""
    with ph._conn() as conn:
        found = conn.execute(
            sql.SQL("SELECT id FROM {} WHERE task_id = ANY(%s) ORDER BY id").format(
                sql.Identifier(ph.config.events_table)
            ),
            (list(task_ids),),
        ).fetchall()
    return [row["id"] for row in found]


def _read_until(follower, count: int) -> list[int]:
    """The row ids a follower hands out, read after read, until `count` (or 30 s: a
    transaction left open elsewhere on the server may hold them back that long)."""
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        got += [row_id for row_id, _ in follower.read()]
        time.sleep(0.01)
    return got + [row_id for row_id, _ in follower.read()]  # and nothing more after


def test_a_row_whose_transaction_commits_after_a_higher_ones_is_followed_not_skipped(ph):
    """Event ids come from a sequence: a transaction holding id n commits after another's
    n + 1. Read in between, then after: the follower, and a follower resumed from the last
    position it handed out (Last-Event-ID), deliver both rows, each once, in id order."""
    from queues.store.batch import PostEntry
    from queues.store.rules import new_task

    start = ph.store.last_event_id(HOST, QUEUE)
    # settling by time so late that only the row arriving can settle it
    follower = ph.store.follow_events(HOST, QUEUE, after_id=None, settle_seconds=3600)
    slow = new_task(HOST, QUEUE, PostEntry(item={"slow": 1}), settings=SETTINGS,
                    posted_by="a", now=T0)  # fmt: skip
    with psycopg.connect(ph.config.dsn, autocommit=True) as held:
        held.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(ph.config.schema)))
        with held.transaction():
            ph.store._writer.insert(held, [slow], now=T0, settings=SETTINGS)  # takes id n
            fast = ph.post({"fast": 1})  # takes n + 1 and commits
            assert _ids_of(ph, fast.id) and not _ids_of(ph, slow.id)  # n is not visible yet
            before = [row_id for row_id, _ in follower.read()]
            assert before == [] and follower.holding  # n + 1 waits for n's transaction
        # the slow one commits here
    [low, high] = _ids_of(ph, slow.id, fast.id)
    assert _ids_of(ph, slow.id) == [low] and low < high  # the slow transaction took the lower
    resumed = ph.store.follow_events(
        HOST, QUEUE, after_id=before[-1] if before else start, settle_seconds=3600
    )
    after = _read_until(follower, 2 - len(before))
    assert before + after == [low, high]
    assert before + _read_until(resumed, 2 - len(before)) == [low, high]


def test_a_row_after_an_id_whose_transaction_rolled_back_is_followed(ph):
    """The gap a rolled-back transaction leaves never fills: once it has been open
    settle_seconds, the rows behind it are handed out."""
    from queues.store.batch import PostEntry
    from queues.store.rules import new_task

    follower = ph.store.follow_events(HOST, QUEUE, after_id=None, settle_seconds=0.5)
    doomed = new_task(HOST, QUEUE, PostEntry(item={"doomed": 1}), settings=SETTINGS,
                      posted_by="a", now=T0)  # fmt: skip
    with psycopg.connect(ph.config.dsn) as held:  # not autocommit
        held.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(ph.config.schema)))
        ph.store._writer.insert(held, [doomed], now=T0, settings=SETTINGS)
        fast = ph.post({"fast": 1})
        held.rollback()
    assert follower.read() == [] and follower.holding  # held back: the gap may yet fill
    assert _read_until(follower, 1) == _ids_of(ph, fast.id)
    assert _ids_of(ph, doomed.id) == [] and not follower.holding


def test_a_follower_of_a_quiet_queue_catches_up_with_a_busy_table_in_one_read(ph):
    """The gap check runs over every queue's ids, a capped range per look: a read looks again
    until it reaches its queue's row, rather than holding the row back."""
    follower = ph.store.follow_events(HOST, QUEUE, after_id=None, settle_seconds=3600)
    follower.gap_check_ids = 3
    for n in range(10):
        ph.store.post(HOST, "busy", {"n": n}, settings=SETTINGS, posted_by="a")
    task = ph.post()
    assert [row_id for row_id, _ in follower.read()] == _ids_of(ph, task.id)


def test_a_new_follower_starts_after_the_newest_row_by_one_index_probe(ph):
    first = ph.post()
    ph.store.post(HOST, "other", {"n": 1}, settings=SETTINGS, posted_by="a")
    [newest] = _ids_of(ph, first.id)
    assert ph.store.last_event_id(HOST, QUEUE) == newest
    assert ph.store.last_event_id(HOST, "empty") == 0
    assert ph.store.follow_events(HOST, QUEUE, after_id=None).read() == []
    with ph._conn() as conn:  # an index answers it, whatever the planner picks for few rows
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(
            sql.SQL(
                "EXPLAIN SELECT id FROM {} WHERE host = %s AND queue = %s ORDER BY id DESC LIMIT 1"
            ).format(sql.Identifier(ph.config.events_table)),
            (HOST, QUEUE),
        ).fetchall()
    text = "\n".join(row["QUERY PLAN"] for row in plan)
    assert f"Index Only Scan Backward using {ph.config.events_table}_queue_id" in text, text


def _pytest_one_postgres_test(**env: str) -> subprocess.CompletedProcess:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgres://postgres@127.0.0.1:{port}/test"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
         "tests/store/test_contract.py::test_record_has_the_spec_fields_and_ext_fields_only_when_set"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TASKHOSTER_TEST_DATABASE_URL": url, **env},
    )  # fmt: skip


def test_without_a_server_the_postgres_param_skips_saying_why():
    done = _pytest_one_postgres_test(TASKHOSTER_REQUIRE_POSTGRES="0")
    assert done.returncode == 0, done.stdout
    assert "1 passed, 1 skipped" in done.stdout
    assert "postgres store tests skipped: no PostgreSQL server at postgres://" in done.stdout


def test_without_a_server_the_postgres_param_fails_where_it_is_required():
    done = _pytest_one_postgres_test(TASKHOSTER_REQUIRE_POSTGRES="1")
    assert done.returncode == 1, done.stdout
    assert "1 passed, 1 error" in done.stdout  # failed in its fixture, which makes the store
    assert "PostgreSQL is required here (TASKHOSTER_REQUIRE_POSTGRES=1)" in done.stdout


def test_a_th_events_table_of_another_schema_does_not_take_this_stores_events():
    with psycopg.connect(pg.database_dsn(), autocommit=True) as conn:
        conn.execute("CREATE TABLE public.th_events (stranger integer)")
        try:
            harness = pg.PgHarness()
            try:
                task = harness.post()
                assert [line["id"] for line in harness.events()] == [task.id]
            finally:
                harness.drop()
        finally:
            conn.execute("DROP TABLE public.th_events")


def test_a_retry_locks_what_its_task_runs_after_before_the_task_itself(ph):
    """An ending locks its task, then its waiters (the release); a retry of a waiter locks the
    tasks it runs after first, then itself. Here an ending of `a` holds a's row while the
    retry of `b` starts; the ending then locks b, as its release does. In the other order the
    two would wait for each other (PostgreSQL ends one with a deadlock error)."""
    a = ph.post({"n": "a"}, settings=procs.LONG)
    b = ph.post({"n": "b"}, settings=procs.LONG, after=[a.id])
    ph.store.cancel(HOST, QUEUE, b.id, settings=procs.LONG, now=T0 + 1)
    got: list = []
    with ph.store._pool.connection() as ending, ending.transaction():
        ending.execute("SET LOCAL lock_timeout = '5s'")
        ending.execute("SELECT 1 FROM th_tasks WHERE id = %s FOR UPDATE", (a.id,))
        retry = threading.Thread(
            target=lambda: got.append(ph.store.retry(HOST, QUEUE, b.id, settings=procs.LONG)),
            daemon=True,
        )
        retry.start()
        time.sleep(0.3)  # the retry is waiting for a's row (it did not lock b before it)
        assert retry.is_alive()
        ending.execute("SELECT 1 FROM th_tasks WHERE id = %s FOR UPDATE", (b.id,))
    retry.join(10)
    assert got and got[0].waiting_for == [f"{QUEUE}/{a.id}"]


def test_a_release_the_database_refuses_is_a_storage_fault_left_to_the_sweep(ph):
    """The background's release meets a database error (here its table gone): one line of the
    store's logger (StorageUnavailable, no traceback), never the thread's end."""
    with ph._conn() as conn:
        conn.execute("DROP TABLE th_dependencies")
    with pytest.raises(StorageUnavailable, match="stopped"):
        ph.store._release_later((HOST, QUEUE, "0123456789abcdef", T0))
