"""Failure notifications end to end: a task fails in the store, the sweep's pass reads the event
log and POSTs the task's status to a real receiver on loopback, signed; a receiver that answers
500 gets it again later; every try and its answer is recorded."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import io
import json
import re

import pytest
from django.core.management import call_command
from django.utils import timezone

from queues import stores
from webhooks.delivering import MAX_TRIES, RETRY_DELAYS
from webhooks.failures import notify_failures
from webhooks.models import Delivery, LogCursor, Notification, State, Webhook
from webhooks.notifying import notify

pytestmark = pytest.mark.django_db
SECOND = dt.timedelta(seconds=1)


def failed_task(queue, *, retry: bool = False):
    """A task its worker fails (with no retry, unless asked): the store logs `failed`."""
    settings = queue.to_settings()
    host, name = queue.host.name, queue.name
    store = stores.of(host, name)
    task = store.post(host, name, {"n": 1}, settings=settings, posted_by="alice").task
    claimed = store.claim(host, name, settings=settings, worker="box-1")[0]
    reported = store.fail(
        host, name, task.id, settings=settings, worker="box-1",
        attempt=claimed.attempts, result={"why": "broken"}, retry=retry,
    )  # fmt: skip
    return reported.task


def verify(request, secret: str) -> bool:
    """What a receiver does (README): HMAC-SHA256 of `<timestamp>.<body>` with the secret."""
    stamp = request.headers["Taskhoster-Timestamp"]
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + request.body, hashlib.sha256)
    return hmac.compare_digest("sha256=" + mac.hexdigest(), request.headers["Taskhoster-Signature"])


def test_a_failed_task_reaches_the_receiver_signed(hooked_queue, receiver):
    task = failed_task(hooked_queue)
    now = timezone.now()
    report = notify(stores.router(), now=now)
    assert (report.made, report.delivered, report.failed) == (1, 1, 0)
    (request,) = receiver.requests
    assert receiver.connections == 1
    assert request.path == "/hooks/taskhoster?q=1"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Taskhoster-Event"] == "task.failed"
    assert abs(int(request.headers["Taskhoster-Timestamp"]) - now.timestamp()) <= 1
    assert verify(request, Webhook.objects.get().secret)
    assert not verify(request, "another secret")
    body = json.loads(request.body)
    assert (body["event"], body["reason"]) == ("task.failed", "failed")
    where = (hooked_queue.host.name, hooked_queue.name)
    assert body["task"] == stores.of(*where).read(*where, task.id).status_view()
    assert body["task"]["status"] == "failed" and body["task"]["result"] == {"why": "broken"}
    note = Notification.objects.get()
    assert (note.state, note.tries, note.task_id) == (State.DELIVERED, 1, task.id)
    assert request.headers["Taskhoster-Notification"] == str(note.pk)
    # The next pass has nothing new to read and nothing to send.
    assert notify(stores.router(), now=now + SECOND) == type(report)(made=0, delivered=0, failed=0)
    assert len(receiver.requests) == 1


def test_a_receiver_answering_500_then_200_gets_it_twice_and_both_are_recorded(
    hooked_queue, receiver
):
    receiver.answers.extend([500])
    failed_task(hooked_queue)
    now = timezone.now()
    assert notify(stores.router(), now=now).failed == 1
    note = Notification.objects.get()
    assert (note.state, note.tries, note.next_try_at) == (State.PENDING, 1, now + RETRY_DELAYS[0])
    assert notify(stores.router(), now=now + RETRY_DELAYS[0] - SECOND).delivered == 0  # not yet
    assert notify(stores.router(), now=now + RETRY_DELAYS[0]).delivered == 1
    first, second = receiver.requests
    assert first.body == second.body
    assert [r.headers["Taskhoster-Attempt"] for r in (first, second)] == ["1", "2"]
    assert all(verify(r, Webhook.objects.get().secret) for r in (first, second))
    tries = list(
        Delivery.objects.order_by("attempt").values_list("attempt", "status_code", "error")
    )
    assert tries == [(1, 500, "answered 500 Internal Server Error"), (2, 200, "")]
    assert Notification.objects.get().state == State.DELIVERED


def test_it_gives_up_after_five_tries(hooked_queue, receiver):
    receiver.answers.extend([503] * MAX_TRIES)
    failed_task(hooked_queue)
    now = timezone.now()
    for wait in (dt.timedelta(0), *RETRY_DELAYS, dt.timedelta(days=1)):
        now += wait
        notify(stores.router(), now=now)
    assert len(receiver.requests) == MAX_TRIES
    note = Notification.objects.get()
    assert (note.state, note.tries, note.deliveries.count()) == (
        State.GAVE_UP,
        MAX_TRIES,
        MAX_TRIES,
    )


def test_a_timeout_and_a_spent_budget_notify_a_retried_failure_does_not(hooked_queue, receiver):
    store, settings = stores.router(), hooked_queue.to_settings()
    host, name = hooked_queue.host.name, hooked_queue.name
    failed_task(hooked_queue, retry=True)  # attempt 1 of 2: requeued, no notification
    assert notify(store, now=timezone.now()).made == 0
    late = (
        stores.of(host, name).post(host, name, {"n": 2}, settings=settings, posted_by="alice").task
    )
    now_ms = int(timezone.now().timestamp() * 1000)
    stores.of(host, name).sweep_queue(
        host, name, settings, now=now_ms + settings.queue_seconds * 1000 + 1
    )
    notify(store, now=timezone.now())
    reasons = {json.loads(r.body)["task"]["id"]: json.loads(r.body)["reason"]
               for r in receiver.requests}  # fmt: skip
    assert reasons[late.id] == "timeout"
    assert len(reasons) == 2  # the retried task timed out too, the same sweep


def test_two_sweeps_reading_the_same_lines_notify_once(hooked_queue, receiver):
    failed_task(hooked_queue)
    now = timezone.now()
    assert notify_failures(stores.router(), now=now) == 1
    # Another sweep read the same chunk before this one's cursor moved: from offset 0 again.
    LogCursor.objects.update(offset=0)
    notify_failures(stores.router(), now=now)
    assert Notification.objects.count() == 1


def test_a_failure_before_the_webhook_existed_is_not_notified(make_queue, receiver, allow_private):
    queue = make_queue()
    failed_task(queue)
    Webhook.objects.create(queue=queue, url=receiver.url)
    Webhook.objects.update(created_at=timezone.now() + SECOND)
    assert notify(stores.router(), now=timezone.now()).made == 0


def test_a_queue_without_a_webhook_or_with_failures_off_is_not_notified(
    hooked_queue, make_queue, receiver
):
    failed_task(make_queue("other.example.com", "plain"))
    Webhook.objects.update(notify_failed=False)
    failed_task(hooked_queue)
    assert notify(stores.router(), now=timezone.now()).made == 0
    assert receiver.requests == []


def test_the_sweep_command_sends_them(hooked_queue, receiver):
    failed_task(hooked_queue)
    call_command("sweep", stdout=io.StringIO())
    (request,) = receiver.requests
    assert json.loads(request.body)["task"]["status"] == "failed"
    assert verify(request, Webhook.objects.get().secret)


def test_a_pending_threshold_crossing_notifies_once_per_crossing(hooked_queue, receiver):
    Webhook.objects.update(pending_threshold=2, notify_failed=False)
    store, settings = stores.router(), hooked_queue.to_settings()
    host, name = hooked_queue.host.name, hooked_queue.name

    def post() -> None:
        stores.of(host, name).post(host, name, {"n": 1}, settings=settings, posted_by="alice")

    def crossings() -> int:
        return notify(store, now=timezone.now()).made

    post(), post()
    assert crossings() == 0  # 2 is not above 2
    post()
    assert crossings() == 1
    post()
    assert crossings() == 0  # still above: no new call
    stores.of(host, name).claim(host, name, settings=settings, worker="box-1", max_tasks=2)
    assert crossings() == 0  # back to 2: re-armed
    post()
    assert crossings() == 1
    bodies = [json.loads(r.body) for r in receiver.requests]
    assert [(b["event"], b["pending"], b["threshold"]) for b in bodies] == [
        ("queue.pending", 3, 2), ("queue.pending", 3, 2),
    ]  # fmt: skip
    assert all(r.headers["Taskhoster-Event"] == "queue.pending" for r in receiver.requests)


def test_a_failure_line_glued_to_a_torn_fragment_is_still_notified(hooked_queue, receiver):
    """A write a full disk cut short left the head of a line, and the failure's line went on
    after it on the same line: the reader takes the line from its own start."""
    task = failed_task(hooked_queue)
    [day_file] = (stores.router().config.logs_dir / "tasks").glob("*.jsonl")
    lines = day_file.read_bytes().split(b"\n")
    failed = next(i for i, line in enumerate(lines) if b'"event":"failed"' in line)
    lines[failed] = lines[failed][:9] + lines[failed]  # a fragment, then the whole line
    day_file.write_bytes(b"\n".join(lines))
    assert notify(stores.router(), now=timezone.now()).made == 1
    assert Notification.objects.get().task_id == task.id


def test_both_kinds_of_call_give_at_in_one_format(hooked_queue, receiver):
    """`at` is ISO 8601 in UTC with milliseconds (as the event log's `at`) in every body."""
    Webhook.objects.update(pending_threshold=1)
    failed_task(hooked_queue)
    store, settings = stores.router(), hooked_queue.to_settings()
    where = (hooked_queue.host.name, hooked_queue.name)
    for _ in range(2):
        stores.of(*where).post(*where, {"n": 1}, settings=settings, posted_by="alice")
    now = dt.datetime(2026, 3, 4, 5, 6, 7, 890_000, tzinfo=dt.UTC)
    notify(store, now=now)
    bodies = {b["event"]: b for b in (json.loads(r.body) for r in receiver.requests)}
    assert set(bodies) == {"task.failed", "queue.pending"}
    assert bodies["queue.pending"]["at"] == "2026-03-04T05:06:07.890Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", bodies["task.failed"]["at"])


def test_a_server_without_the_queues_directories_neither_fires_nor_rearms_its_alert(
    hooked_queue, receiver, tmp_path
):
    """The several-servers layout: the other server reads the file queue as empty; it must
    leave the alert to the server that holds the queue, which then fires once per crossing."""
    from queues.store import QueueStore, StoreConfig
    from webhooks.thresholds import notify_pending

    Webhook.objects.update(pending_threshold=1, notify_failed=False)
    store, settings = stores.router(), hooked_queue.to_settings()
    where = (hooked_queue.host.name, hooked_queue.name)
    for _ in range(2):
        stores.of(*where).post(*where, {"n": 1}, settings=settings, posted_by="alice")
    root = tmp_path / "other-server"
    other = QueueStore(StoreConfig(items_dir=root / "items", logs_dir=root / "logs", fsync=False))
    try:
        for _ in range(3):
            assert notify(store, now=timezone.now()).made <= 1
            assert notify_pending(lambda host, queue: other, now=timezone.now()) == 0
        assert other.queues() == []
    finally:
        other.close()
    assert [json.loads(r.body)["event"] for r in receiver.requests] == ["queue.pending"]
    assert Webhook.objects.get().pending_alerted


def test_a_logs_disk_not_mounted_now_is_a_pass_with_nothing_to_notify(hooked_queue, receiver):
    """Between an unmount of the logs disk and the next mount its tasks/ directory is missing:
    the pass notifies nothing and says no error; the failure is notified once it is back."""
    failed_task(hooked_queue)
    tasks = stores.router().config.logs_dir / "tasks"
    away = tasks.with_name("tasks-away")
    tasks.rename(away)
    assert notify_failures(stores.router(), now=timezone.now()) == 0
    away.rename(tasks)
    assert notify_failures(stores.router(), now=timezone.now()) == 1
