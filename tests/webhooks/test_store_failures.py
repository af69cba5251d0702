"""Failure notifications of PostgreSQL queues: read from the store's events table (in the
console's database, or on TASKHOSTER_PG_STORE_URL), one per failure however often the rows
are read, and none skipped when a failure's row commits after a row with a higher id."""

from __future__ import annotations

import json

import psycopg
import pytest
from django.utils import timezone
from psycopg import sql

from queues import stores
from queues.store.eventlog import NO_REASON
from queues.store.records import Task
from queues.stores import pg_events
from webhooks.failures import notify_failures
from webhooks.models import LogCursor, Notification, Webhook
from webhooks.notifying import notify

from .test_notifications import failed_task, verify

pytestmark = pytest.mark.django_db


@pytest.fixture
def pg_hooked(make_queue, receiver, allow_private, pg_store):
    """A PostgreSQL queue whose webhook calls the receiver."""
    queue = make_queue(max_attempts=2, store="postgres")
    hook = Webhook(queue=queue, url=receiver.url)
    hook.full_clean()
    hook.save()
    return queue


def bodies(receiver) -> dict[str, dict]:
    return {json.loads(r.body)["task"]["id"]: json.loads(r.body) for r in receiver.requests}


def test_a_failed_task_of_a_postgres_queue_reaches_the_receiver_signed(pg_hooked, receiver):
    task = failed_task(pg_hooked)
    now = timezone.now()
    report = notify(stores.router(), now=now)
    assert (report.made, report.delivered, report.failed) == (1, 1, 0)
    (request,) = receiver.requests
    assert verify(request, Webhook.objects.get().secret)
    body = json.loads(request.body)
    assert (body["event"], body["reason"]) == ("task.failed", "failed")
    store = stores.router()
    assert (
        body["task"]
        == stores.of(pg_hooked.host.name, pg_hooked.name)
        .read(pg_hooked.host.name, pg_hooked.name, task.id)
        .status_view()
    )
    assert Notification.objects.get().source.startswith("pg:")
    # read to the end: the next pass makes nothing and sends nothing
    assert notify(store, now=now).made == 0 and len(receiver.requests) == 1


def test_a_timeout_notifies_and_a_retried_failure_does_not(pg_hooked, receiver):
    store, settings = stores.router(), pg_hooked.to_settings()
    host, name = pg_hooked.host.name, pg_hooked.name
    failed_task(pg_hooked, retry=True)  # attempt 1 of 2: requeued
    assert notify(store, now=timezone.now()).made == 0
    late = (
        stores.of(host, name).post(host, name, {"n": 2}, settings=settings, posted_by="alice").task
    )
    now_ms = int(timezone.now().timestamp() * 1000)
    stores.of(host, name).sweep_queue(
        host, name, settings, now=now_ms + settings.queue_seconds * 1000 + 1
    )
    notify(store, now=timezone.now())
    reasons = {task_id: body["reason"] for task_id, body in bodies(receiver).items()}
    assert reasons[late.id] == "timeout" and len(reasons) == 2


def test_two_sweeps_reading_the_same_rows_notify_once(pg_hooked, receiver):
    failed_task(pg_hooked)
    failed_task(pg_hooked)
    now = timezone.now()
    assert notify_failures(stores.router(), now=now) == 2
    cursor = LogCursor.objects.get(name__startswith="postgres:")
    assert cursor.offset > 0
    # another sweep read the same rows before this one's cursor moved: from the start again
    LogCursor.objects.update(offset=0)
    notify_failures(stores.router(), now=now)
    assert Notification.objects.count() == 2


def test_a_failure_whose_row_commits_late_is_notified_and_the_cursor_waits_for_it(
    pg_hooked, receiver, pg_store, monkeypatch
):
    """Row ids are drawn before commit: a failure's row drawn first and committed last must
    not be passed over by a cursor that moved past the later rows."""
    monkeypatch.setattr(pg_events, "SETTLE_SECONDS", 0.2)
    store = stores.router()
    early = failed_task(pg_hooked)
    with _open_writer(pg_store) as writer:
        _write_failure_row(writer, early.replace(id="00000000000fade0"))  # drawn, not committed
        later = failed_task(pg_hooked)  # a higher id, committed
        assert notify_failures(store, now=timezone.now()) == 2  # early and later: visible
        cursor = LogCursor.objects.get(name__startswith="postgres:")
        # a writer of the horizon is still open: the cursor may not pass its row
        assert cursor.offset == 0
        writer.commit()
    notify_failures(store, now=timezone.now())
    ids = set(Notification.objects.values_list("task_id", flat=True))
    assert ids == {early.id, later.id, "00000000000fade0"}
    assert Notification.objects.count() == 3
    assert LogCursor.objects.get(name__startswith="postgres:").offset > 0  # final now
    notify_failures(store, now=timezone.now())
    assert Notification.objects.count() == 3


def test_no_postgres_queue_hooked_no_connection_to_the_store(hooked_queue, settings):
    """A site whose hooked queues are all file queues never opens the PostgreSQL store, even
    with one configured (here one that would not answer)."""
    settings.TASKHOSTER_PG_STORE_URL = "postgresql://nobody@127.0.0.1:1/gone?connect_timeout=2"
    failed_task(hooked_queue)
    assert notify_failures(stores.router(), now=timezone.now()) == 1


def _open_writer(location) -> psycopg.Connection:
    conn = psycopg.connect(location.dsn)
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(location.schema)))
    return conn


def _write_failure_row(conn: psycopg.Connection, task: Task) -> None:
    """A `failed` row as the store writes it, in the connection's open transaction."""
    pg = stores.router().postgres
    failed = task.replace(updated_at=task.updated_at + 1)
    pg._writer._log(conn, [(failed, "failed", "box-1", [], NO_REASON)], now=failed.updated_at)


def test_a_store_that_does_not_answer_holds_up_no_file_queues_notification(
    hooked_queue, make_queue, receiver, settings, caplog
):
    from django.db import connection

    if connection.vendor == "postgresql":
        pytest.skip("on PostgreSQL the store is the console's own database, which answers")
    settings.TASKHOSTER_PG_STORE_URL = "postgresql://nobody@127.0.0.1:1/gone?connect_timeout=2"
    far = make_queue("far.example.com", "resize", store="postgres")
    Webhook.objects.create(queue=far, url=receiver.url)
    failed_task(hooked_queue)
    report = notify(stores.router(), now=timezone.now())
    assert (report.made, report.delivered) == (1, 1)
    assert "failures of PostgreSQL queues not read: The task database is not reachable" in (
        caplog.text
    )
