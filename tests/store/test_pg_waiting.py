"""The PostgreSQL store's waits: a waiting claim and a waiting read are woken by NOTIFY from
any process, and a waiter looks at the table again every poll_seconds, so what no notification
announces (a delayed task coming due, a notification lost) still reaches it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from queues.monitor.pg_tail import PgTail, RowsChannel
from queues.monitor.stream import Subscription, event_stream
from queues.store_pg import PostgresStore
from queues.store_pg.waits import LISTENER_NAME

from . import pg
from .conftest import HOST, QUEUE, SETTINGS

ROOT = Path(__file__).resolve().parents[2]
# long enough that a waiter that was not woken would still be asleep when the test looks
SLEEPY = 60.0


@pytest.fixture
def ph():
    harness = pg.PgHarness(replace(pg.fresh_config(), poll_seconds=SLEEPY))
    yield harness
    harness.drop()


def _in_thread(target) -> tuple[threading.Thread, list]:
    got: list = []
    thread = threading.Thread(target=lambda: got.append(target()), daemon=True)
    thread.start()
    return thread, got


def _post_from_another_process(ph) -> str:
    code = (
        "import sys\n"
        "from queues.store import QueueSettings\n"
        "from queues.store_pg import PgStoreConfig, PostgresStore\n"
        "s = PostgresStore(PgStoreConfig(dsn=sys.argv[1], schema=sys.argv[2]))\n"
        "print(s.post(sys.argv[3], sys.argv[4], {'n': 1}, settings=QueueSettings(),"
        " posted_by='x').task.id)\n"
    )
    args = [ph.config.dsn, ph.config.schema, HOST, QUEUE]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, check=True, text=True
    )
    return done.stdout.strip()


def _listening(store: PostgresStore) -> None:
    store._waits.generation((HOST, QUEUE))  # starts the listener
    assert store._waits.listening.wait(10)


def test_a_waiting_claim_is_woken_by_a_post_from_another_process(ph):
    ph.store.create_queue(HOST, QUEUE)
    _listening(ph.store)
    thread, got = _in_thread(
        lambda: ph.store.wait_claim(HOST, QUEUE, settings=SETTINGS, worker="w", wait_seconds=SLEEPY)
    )
    time.sleep(0.2)
    assert thread.is_alive()  # nothing to claim: it sleeps
    task_id = _post_from_another_process(ph)
    thread.join(SLEEPY / 3)  # its timeout and its poll are both SLEEPY: only NOTIFY wakes it
    assert not thread.is_alive()
    assert [t.id for t in got[0]] == [task_id]


def test_a_waiting_claim_sleeps_through_another_queues_posts(ph):
    ph.store.create_queue(HOST, QUEUE)
    _listening(ph.store)
    calls = []
    claim = ph.store.claim
    ph.store.claim = lambda *a, **kw: calls.append(1) or claim(*a, **kw)
    thread, got = _in_thread(
        lambda: ph.store.wait_claim(HOST, QUEUE, settings=SETTINGS, worker="w", wait_seconds=3)
    )
    time.sleep(0.2)
    for n in range(5):
        ph.store.post(HOST, "thumbs", {"n": n}, settings=SETTINGS, posted_by="a")
    time.sleep(0.3)
    assert len(calls) == 2 and thread.is_alive()  # a look, a second one once counted: asleep
    thread.join(10)
    assert got == [[]]


def test_a_waiting_read_is_woken_by_the_change(ph):
    task = ph.post()
    _listening(ph.store)
    other = PostgresStore(ph.config)
    thread, got = _in_thread(
        lambda: ph.store.wait_for_change(
            HOST, QUEUE, task.id, since=task.updated_at, wait_seconds=SLEEPY
        )
    )
    time.sleep(0.2)
    assert thread.is_alive()
    other.cancel(HOST, QUEUE, task.id, settings=SETTINGS)
    other.close()
    thread.join(SLEEPY / 3)
    assert not thread.is_alive() and got[0].status.value == "cancelled"


def test_a_delayed_task_coming_due_reaches_a_waiting_claim_by_its_poll():
    """No notification says a delayed task is due: the waiter's poll finds it."""
    harness = pg.PgHarness(replace(pg.fresh_config(), poll_seconds=0.2))
    try:
        task = harness.store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="a",
                                  delay_seconds=1).task  # fmt: skip
        got = harness.store.wait_claim(HOST, QUEUE, settings=SETTINGS, worker="w",
                                       wait_seconds=SLEEPY)  # fmt: skip
        assert [t.id for t in got] == [task.id]
    finally:
        harness.drop()


def _listener_pid(ph) -> int | None:
    """The backend of the store's LISTEN connection (it names itself), once it listens."""
    with ph._conn() as conn:
        found = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s AND query LIKE 'LISTEN%%'",
            (LISTENER_NAME,),
        ).fetchall()
    return int(found[0]["pid"]) if len(found) == 1 else None


def _a_new_listener(ph, old: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pid = _listener_pid(ph)
        if pid is not None and pid != old and ph.store._waits.listening.is_set():
            return pid
        time.sleep(0.05)
    raise AssertionError("no new LISTEN connection in 30 s")


def test_the_listener_reconnects_after_its_connection_is_ended(ph):
    """The LISTEN connection killed (as an administrator or a failover would): the thread
    opens another and LISTENs again, so a waiting claim is woken by NOTIFY once more (the
    poll is SLEEPY: nothing else could wake it within the test's wait)."""
    ph.store.create_queue(HOST, QUEUE)
    _listening(ph.store)
    old = _listener_pid(ph)
    assert old is not None
    with ph._conn() as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s) AS ok", (old,)).fetchone()["ok"]
    _a_new_listener(ph, old)
    thread, got = _in_thread(
        lambda: ph.store.wait_claim(HOST, QUEUE, settings=SETTINGS, worker="w", wait_seconds=SLEEPY)
    )
    time.sleep(0.2)
    assert thread.is_alive()
    task_id = _post_from_another_process(ph)
    thread.join(SLEEPY / 3)
    assert not thread.is_alive()
    assert [t.id for t in got[0]] == [task_id]


def test_an_event_stream_is_woken_by_a_post_from_another_store(ph):
    """The live event stream of a postgres queue sleeps on the store's LISTEN thread: its
    look-again interval, its keep-alive and the store's poll are all SLEEPY, and the posted
    event still arrives (only a NOTIFY could have woken it)."""
    ph.store.create_queue(HOST, QUEUE)
    follower = ph.store.follow_events(HOST, QUEUE, after_id=None)
    _listening(ph.store)
    chunks = event_stream(PgTail(follower), RowsChannel(follower),
                          Subscription(host=HOST, queue=QUEUE),
                          keepalive=SLEEPY, liveness=SLEEPY)  # fmt: skip
    assert next(chunks).startswith(b"retry: ")
    thread, got = _in_thread(lambda: next(chunks))
    time.sleep(0.2)
    assert thread.is_alive()  # nothing happened yet: it sleeps
    other = PostgresStore(ph.config)  # another web server's store: its own connections
    task = other.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="a").task
    other.close()
    thread.join(SLEEPY / 3)
    assert not thread.is_alive()
    assert b"event: posted" in got[0] and task.id.encode() in got[0]
    chunks.close()
