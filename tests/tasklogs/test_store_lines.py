"""Every line the store writes is one Task Logs ingests: the real store, every event it logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from queues.store import OnComplete, QueueSettings, QueueStore, StoreConfig, sweep_queue
from queues.store.eventlog import EVENTS
from tasklogs.ingest import ingest_directory
from tasklogs.models import TaskEvent

pytestmark = pytest.mark.django_db
HOST, QUEUE = "task.example.com", "resize"
T0 = 1_751_500_000_000  # ms; the store is given its time, never the clock
SECOND, DAY = 1000, 86_400_000
SETTINGS = QueueSettings(
    lease_seconds=60, queue_seconds=86_400, retain_seconds=3600, archive_payloads=True
)


def test_every_event_the_store_writes_is_ingested(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    try:
        drive_every_event(store)
    finally:
        store.close()
    written = sum(len(p.read_bytes().splitlines()) for p in (logs / "tasks").glob("*.jsonl"))

    report = ingest_directory(logs / "tasks")

    assert report.bad_lines == [] and report.bad == 0
    assert report.lines == written == TaskEvent.objects.count()
    # Every event the store may write has been written and stored: an event added to the store
    # later fails here until this test drives it (and the ingester takes it).
    assert set(TaskEvent.objects.values_list("event", flat=True)) == EVENTS
    quarantined = TaskEvent.objects.get(event="quarantined")
    assert (quarantined.task_id, quarantined.status) == ("9f2c1a0b7d4e6f83", "quarantined")
    # the optional fields are stored, and empty on the lines that do not have them
    by = dict(TaskEvent.objects.exclude(by="").values_list("event", "by"))
    assert by == {"requeued": "olga", "deleted": "olga", "retried": "olga", "posted": "olga",
                  "hastened": "olga"}  # fmt: skip
    edited = TaskEvent.objects.get(edited=True)
    assert (edited.event, edited.archived) == ("retried", "item")
    reposted = TaskEvent.objects.exclude(origin="")
    assert reposted.count() == 1 and reposted.get().event == "posted"
    assert TaskEvent.objects.filter(lapsed=True).values_list("event", flat=True).get() == "requeue"


def drive_every_event(store: QueueStore) -> None:
    def post(now: int) -> str:
        posted = store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="a", now=now)
        return posted.task.id

    def claim(now: int) -> tuple[str, int]:
        [task] = store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", now=now)
        return task.id, task.attempts

    held = {"settings": SETTINGS, "worker": "box-1"}
    # posted, claimed, progress, result, fetched
    post(T0)
    done, attempt = claim(T0 + SECOND)
    store.progress(HOST, QUEUE, done, attempt=attempt, progress={"pct": 50}, now=T0 + 2 * SECOND,
                   **held)  # fmt: skip
    store.finish(HOST, QUEUE, done, attempt=attempt, result={"ok": True}, now=T0 + 3 * SECOND,
                 **held)  # fmt: skip
    store.fetch(HOST, QUEUE, done, now=T0 + 4 * SECOND)
    # failed, retried
    post(T0 + 5 * SECOND)
    failed, attempt = claim(T0 + 6 * SECOND)
    store.fail(HOST, QUEUE, failed, attempt=attempt, result={"why": "no"}, now=T0 + 7 * SECOND,
               **held)  # fmt: skip
    store.retry(HOST, QUEUE, failed, settings=SETTINGS, now=T0 + 8 * SECOND)
    # cancelled: claim the retried task first, so the new one is the only pending task left
    claim(T0 + 9 * SECOND)
    cancelled = post(T0 + 10 * SECOND)
    store.cancel(HOST, QUEUE, cancelled, settings=SETTINGS, now=T0 + 11 * SECOND)
    # requeue (the lease of the retried task lapses) and quarantined (a corrupt file), one sweep
    pending = store.config.items_dir / HOST / QUEUE / "pending"
    (pending / "9f2c1a0b7d4e6f83.json").write_bytes(b"{not json")
    report = sweep_queue(store, HOST, QUEUE, SETTINGS, now=T0 + 120 * SECOND)
    assert (report.requeue, report.quarantined) == (1, 1)
    # timeout (the requeued task has waited a day), cleaned (the finished ones, an hour on)
    report = sweep_queue(store, HOST, QUEUE, SETTINGS, now=T0 + DAY + 60 * SECOND)
    assert report.timeout == 1 and report.cleaned >= 1
    # an operator's verbs, each naming the operator: requeue a stuck task, delete an ended one,
    # edit a failed one's item and retry it, re-post a cleaned one from its archive
    later = T0 + DAY + 120 * SECOND
    stuck = post(later)
    claim(later + SECOND)
    store.requeue(HOST, QUEUE, stuck, settings=SETTINGS, now=later + 2 * SECOND, by="olga")
    store.cancel(HOST, QUEUE, stuck, settings=SETTINGS, now=later + 3 * SECOND)
    store.retry(HOST, QUEUE, stuck, settings=SETTINGS, now=later + 4 * SECOND, by="olga",
                item={"n": 2})  # fmt: skip
    store.cancel(HOST, QUEUE, stuck, settings=SETTINGS, now=later + 5 * SECOND)
    store.delete(HOST, QUEUE, stuck, now=later + 6 * SECOND, by="olga")
    store.repost(HOST, QUEUE, done, settings=SETTINGS, now=later + 7 * SECOND, by="olga")
    # released: a task posted to run after another is let go once that one finished
    end = later + 8 * SECOND
    first = store.post(
        HOST, QUEUE, {"n": 3}, settings=SETTINGS, posted_by="a", priority=10, now=end
    ).task.id  # priority: claimed before the re-posted task
    store.post(HOST, QUEUE, {"n": 3}, settings=SETTINGS, posted_by="a", now=end, after=[first])
    assert claim(end + SECOND) == (first, 1)
    store.finish(HOST, QUEUE, first, attempt=1, result={"ok": True}, now=end + 2 * SECOND,
                 **held)  # fmt: skip
    # hastened: an operator lets a delayed task be claimed now
    delayed = store.post(HOST, QUEUE, {"n": 4}, settings=SETTINGS, posted_by="a",
                         delay_seconds=3600, now=end + 3 * SECOND).task  # fmt: skip
    store.hasten(HOST, QUEUE, delayed.id, settings=SETTINGS, now=end + 4 * SECOND, by="olga")
    # callback: a group's last task ended, and its callback was posted
    closing = OnComplete(queue="reports", item={}, settings=SETTINGS)
    member = store.post(HOST, QUEUE, {"n": 5}, settings=SETTINGS, posted_by="a",
                        now=end + 5 * SECOND, group="g", on_complete=closing).task  # fmt: skip
    store.cancel(HOST, QUEUE, member.id, settings=SETTINGS, now=end + 6 * SECOND)
    # unclaimed: a claim given back, its attempt uncounted, as its caller left before the answer
    given = store.post(HOST, QUEUE, {"n": 6}, settings=SETTINGS, posted_by="a", priority=50,
                       now=end + 7 * SECOND).task.id  # fmt: skip
    assert claim(end + 8 * SECOND) == (given, 1)
    store.unclaim(HOST, QUEUE, given, attempt=1, now=end + 9 * SECOND, **held)
