"""The operator's verbs: every action names its operator on the event line; requeue a stuck
task, hasten one waiting out its backoff or delay, delete an ended one, edit a failed one's item
and retry it, re-post one from its archive. Each refusal is tested with what it leaves unchanged."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from queues.store import (
    InvalidItem,
    LeaseLost,
    NotArchived,
    NotDeletable,
    NotFound,
    NotRequeueable,
    NotRetryable,
    NotWaiting,
    PayloadTooLarge,
    State,
    sweep_queue,
)
from queues.store.records import TRANSITIONS

from .conftest import HOST, QUEUE, SETTINGS, T0

ARCHIVING = replace(SETTINGS, archive_payloads=True)
SECOND = 1000


def _failed(h, settings=SETTINGS, item=None):
    task = h.post(item, settings=settings)
    h.claim(settings=settings)
    h.store.fail(HOST, QUEUE, task.id, settings=settings, worker="box-1", attempt=1,
                 result={"why": "bad url"}, now=T0 + 2 * SECOND)  # fmt: skip
    return task


def _archive(h, task_id):
    return h.config.logs_dir / "tasks-payloads" / HOST / QUEUE / task_id


# -- who did it ------------------------------------------------------------------------------


def test_an_operators_cancel_and_retry_name_the_operator_and_an_owners_name_nobody(h):
    mine = h.post()
    h.store.cancel(HOST, QUEUE, mine.id, settings=SETTINGS, now=T0 + 1, by="olga")
    h.store.retry(HOST, QUEUE, mine.id, settings=SETTINGS, now=T0 + 2)
    cancelled, retried = h.events(mine.id)[1:]
    assert (cancelled["event"], cancelled["by"]) == ("cancelled", "olga")
    # an owner's call through the API gives no name: the line has no `by` at all
    assert retried["event"] == "retried" and "by" not in retried and "edited" not in retried
    assert all("from" not in line and "lapsed" not in line for line in h.events())


# -- requeue ---------------------------------------------------------------------------------


def test_requeue_ends_a_stuck_lease_now_and_the_attempt_counts(h):
    task = h.post()
    h.claim(now=T0 + SECOND)
    back = h.store.requeue(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 5 * SECOND,
                           by="olga")  # fmt: skip
    assert back.status is State.PENDING and back.lease is None and back.attempts == 1
    assert h.where(task.id) == ["pending"] and h.on_disk(task.id)["pending"]["updatedAt"] == (
        T0 + 5 * SECOND
    )
    line = h.events(task.id)[-1]
    assert (line["event"], line["by"], line["worker"], line["attempts"]) == (
        "requeued", "olga", "box-1", 1,
    )  # fmt: skip
    # claimable at once, as the next attempt; the old worker's report is refused
    assert h.claim(now=T0 + 6 * SECOND, worker="box-2").attempts == 2
    with pytest.raises(LeaseLost):
        h.store.finish(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1,
                       result={}, now=T0 + 7 * SECOND)  # fmt: skip


def test_requeue_past_the_budget_fails_the_task_as_a_lapsed_lease_would(h):
    one = replace(SETTINGS, max_attempts=1)
    task = h.post(settings=one)
    h.claim(settings=one)
    ended = h.store.requeue(HOST, QUEUE, task.id, settings=one, now=T0 + 5 * SECOND, by="olga")
    assert (ended.status, ended.error) == (State.FAILED, "attempts")
    line = h.events(task.id)[-1]
    assert (line["event"], line["by"], line["status"]) == ("failed", "olga", "failed")


def test_requeue_of_a_task_whose_cancel_was_requested_cancels_it(h):
    task = h.post()
    h.claim()
    h.store.cancel(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 2 * SECOND, by="olga")
    ended = h.store.requeue(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 3 * SECOND,
                            by="olga")  # fmt: skip
    assert ended.status is State.CANCELLED and h.where(task.id) == ["done"]
    assert h.event_names(task.id)[-1] == "cancelled"


@pytest.mark.parametrize("state", ["pending", "finished", "failed"])
def test_requeue_refuses_a_task_that_is_not_processing_and_changes_nothing(h, state):
    task = h.post()
    if state != "pending":
        h.claim()
        outcome = {"finished": h.store.finish, "failed": h.store.fail}[state]
        outcome(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1, result={},
                now=T0 + 2 * SECOND)  # fmt: skip
    disk, events = h.on_disk(task.id), h.events()
    with pytest.raises(NotRequeueable) as refused:
        h.store.requeue(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 3 * SECOND, by="olga")
    assert refused.value.code == "not_requeueable"
    assert h.on_disk(task.id) == disk and h.events() == events


# -- hasten ----------------------------------------------------------------------------------


def _backing_off(h):
    """A task whose first attempt failed with retry: pending, claimable at T0 + 61 s."""
    slow = replace(SETTINGS, backoff_seconds=60)
    task = h.post(settings=slow)
    h.claim(settings=slow, now=T0 + SECOND)
    back = h.store.fail(HOST, QUEUE, task.id, settings=slow, worker="box-1", attempt=1,
                        result={"why": "busy"}, retry=True, now=T0 + SECOND).task  # fmt: skip
    assert back.available_at == T0 + 61 * SECOND
    return back


def test_hasten_makes_a_task_in_its_backoff_claimable_now_and_keeps_its_attempts(h):
    task = _backing_off(h)
    assert h.claim(now=T0 + 2 * SECOND) is None
    now = h.store.hasten(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 3 * SECOND, by="olga")
    assert now.status is State.PENDING and now.available_at == 0 and now.attempts == 1
    assert now.last_error == {"why": "busy"} and now.max_attempts == task.max_attempts
    assert h.where(task.id) == ["pending"]
    stats = h.store.stats(HOST, QUEUE, now=T0 + 3 * SECOND)
    assert (stats.pending, stats.retrying, stats.delayed) == (1, 0, 0)
    line = h.events(task.id)[-1]
    assert (line["event"], line["by"], line["status"], line["attempts"]) == (
        "hastened", "olga", "pending", 1,
    )  # fmt: skip
    assert h.claim(now=T0 + 4 * SECOND, worker="box-2").attempts == 2


def test_hasten_ends_a_posts_delay(h):
    task = h.post(delay_seconds=3600)
    assert h.claim(now=T0 + SECOND) is None
    h.store.hasten(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 2 * SECOND, by="olga")
    claimed = h.claim(now=T0 + 3 * SECOND)
    assert claimed is not None and claimed.id == task.id and claimed.attempts == 1


@pytest.mark.parametrize("state", ["claimable", "processing", "finished", "failed"])
def test_hasten_refuses_a_task_that_is_not_waiting_and_changes_nothing(h, state):
    task = h.post()
    if state != "claimable":
        h.claim()
    if state in ("finished", "failed"):
        outcome = {"finished": h.store.finish, "failed": h.store.fail}[state]
        outcome(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1, result={},
                now=T0 + 2 * SECOND)  # fmt: skip
    disk, events = h.on_disk(task.id), h.events()
    with pytest.raises(NotWaiting) as refused:
        h.store.hasten(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 3 * SECOND, by="olga")
    assert refused.value.code == "not_waiting"
    assert h.on_disk(task.id) == disk and h.events() == events


def test_hasten_after_the_backoff_is_over_is_refused(h):
    task = _backing_off(h)
    with pytest.raises(NotWaiting):
        h.store.hasten(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 61 * SECOND, by="olga")


def test_hasten_of_an_unknown_task_is_not_found(h):
    with pytest.raises(NotFound):
        h.store.hasten(HOST, QUEUE, "0123456789abcdef", settings=SETTINGS, now=T0, by="olga")


# -- delete ----------------------------------------------------------------------------------


def test_delete_removes_an_ended_task_and_keeps_its_archive(h):
    task = _failed(h, ARCHIVING)
    h.store.delete(HOST, QUEUE, task.id, now=T0 + 3 * SECOND, by="olga")
    assert h.on_disk(task.id) == {}
    with pytest.raises(NotFound):
        h.store.read(HOST, QUEUE, task.id)
    line = h.events(task.id)[-1]
    assert (line["event"], line["status"], line["by"]) == ("deleted", "failed", "olga")
    assert orjson.loads(h.archive(task.id)["item.json"]) == {"n": 1}


def test_delete_removes_the_tasks_idempotency_key(h):
    first = h.post(idempotency_key="k-1")
    h.store.cancel(HOST, QUEUE, first.id, settings=SETTINGS, now=T0 + 1)
    h.store.delete(HOST, QUEUE, first.id, now=T0 + 2, by="olga")
    # the key went with its task: the same key posts a new task, not a replay of a deleted one
    again = h.post(idempotency_key="k-1", now=T0 + 3)
    assert again.id != first.id and h.where(again.id) == ["pending"]


@pytest.mark.parametrize("claimed", [False, True])
def test_delete_refuses_a_task_that_has_not_ended(h, claimed):
    task = h.post()
    if claimed:
        h.claim()
    disk, events = h.on_disk(task.id), h.events()
    with pytest.raises(NotDeletable) as refused:
        h.store.delete(HOST, QUEUE, task.id, now=T0 + 3 * SECOND, by="olga")
    assert refused.value.code == "not_deletable"
    assert h.on_disk(task.id) == disk and h.events() == events


def test_delete_of_an_unknown_task_is_not_found(h):
    h.post()
    with pytest.raises(NotFound):
        h.store.delete(HOST, QUEUE, "0123456789abcdef", now=T0, by="olga")


# -- edit and retry --------------------------------------------------------------------------


def test_edit_and_retry_replaces_the_item_and_says_so(h):
    task = _failed(h, ARCHIVING, item={"url": "htp://typo"})
    back = h.store.retry(HOST, QUEUE, task.id, settings=ARCHIVING, now=T0 + 3 * SECOND,
                         by="olga", item={"url": "http://fixed"})  # fmt: skip
    assert back.status is State.PENDING and back.item == {"url": "http://fixed"}
    assert h.on_disk(task.id)["pending"]["item"] == {"url": "http://fixed"}
    line = h.events(task.id)[-1]
    assert (line["event"], line["by"], line["edited"], line["archived"]) == (
        "retried", "olga", True, ["item"],
    )  # fmt: skip
    assert line["bytes"]["item"] == len(orjson.dumps({"url": "http://fixed"}))
    # item.json is the item the task runs with now; the posted item stays archived beside
    # the edited one, each named by its line's attempts and event
    folder = h.archive(task.id)
    assert orjson.loads(folder["item.json"]) == {"url": "http://fixed"}
    assert orjson.loads(folder["0-posted.item.json"]) == {"url": "htp://typo"}
    assert orjson.loads(folder["1-retried.item.json"]) == {"url": "http://fixed"}
    assert h.claim(settings=ARCHIVING, now=T0 + 4 * SECOND).item == {"url": "http://fixed"}


SCHEMA = replace(
    SETTINGS,
    max_item_bytes=64,
    item_schema={"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}}},
)


@pytest.mark.parametrize(
    ("item", "refusal"),
    [
        ({"url": 5}, InvalidItem),
        ({"other": "x"}, InvalidItem),
        (["not", "an", "object"], InvalidItem),
        ({"url": "x" * 100}, PayloadTooLarge),
    ],
)
def test_an_edited_item_is_checked_as_a_post_and_a_refusal_changes_nothing(h, item, refusal):
    task = _failed(h, SCHEMA, item={"url": "a"})
    disk, events = h.on_disk(task.id), h.events()
    with pytest.raises(refusal):
        h.store.retry(HOST, QUEUE, task.id, settings=SCHEMA, now=T0 + 3 * SECOND, by="olga",
                      item=item)  # fmt: skip
    assert h.on_disk(task.id) == disk and h.events() == events


def test_edit_and_retry_of_a_running_task_is_refused(h):
    task = h.post()
    h.claim()
    disk = h.on_disk(task.id)
    with pytest.raises(NotRetryable):
        h.store.retry(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 3, by="olga",
                      item={"n": 2})  # fmt: skip
    assert h.on_disk(task.id) == disk


# -- re-post ---------------------------------------------------------------------------------


def test_repost_after_the_store_cleaned_the_task_posts_its_archived_item(h):
    old = _failed(h, ARCHIVING, item={"url": "http://a"})
    report = sweep_queue(h.store, HOST, QUEUE, ARCHIVING, now=T0 + 2 * 3600 * SECOND)
    assert report.cleaned == 1 and h.on_disk(old.id) == {}

    new = h.store.repost(HOST, QUEUE, old.id, settings=ARCHIVING, now=T0 + 7300 * SECOND,
                         by="olga").task  # fmt: skip
    assert new.id != old.id and new.item == {"url": "http://a"} and new.posted_by == "olga"
    assert h.on_disk(new.id)["pending"]["repostedFrom"] == old.id
    posted = h.events(new.id)[0]
    assert (posted["event"], posted["from"], posted["by"]) == ("posted", old.id, "olga")
    # every later line of the new task names the old id too, whoever writes it
    h.claim(settings=ARCHIVING, now=T0 + 7301 * SECOND)
    assert [line.get("from") for line in h.events(new.id)] == [old.id, old.id]
    assert "by" not in h.events(new.id)[1]


def test_repost_takes_the_newest_edited_item(h):
    old = _failed(h, ARCHIVING, item={"url": "v1"})
    h.store.retry(HOST, QUEUE, old.id, settings=ARCHIVING, now=T0 + 3 * SECOND, item={"url": "v2"})
    h.claim(settings=ARCHIVING, now=T0 + 4 * SECOND)
    h.store.fail(HOST, QUEUE, old.id, settings=ARCHIVING, worker="box-1", attempt=2, result={},
                 now=T0 + 5 * SECOND)  # fmt: skip
    h.store.retry(HOST, QUEUE, old.id, settings=ARCHIVING, now=T0 + 6 * SECOND, item={"url": "v3"})
    assert sorted(h.archive(old.id)) == [
        "0-posted.item.json", "1-failed.result.json", "1-retried.item.json",
        "2-failed.result.json", "2-retried.item.json", "item.json", "result.json",
    ]  # fmt: skip
    new = h.store.repost(HOST, QUEUE, old.id, settings=ARCHIVING, now=T0 + 7 * SECOND).task
    assert new.item == {"url": "v3"}


def test_a_second_edit_before_the_task_ran_again_overwrites_no_earlier_item(h):
    """Edit and retry, cancel, edit and retry again: the same attempt, three items kept."""
    task = _failed(h, ARCHIVING, item={"url": "v1"})
    for n, url in enumerate(("v2", "v3"), start=3):
        h.store.retry(HOST, QUEUE, task.id, settings=ARCHIVING, now=T0 + n * SECOND,
                      item={"url": url})  # fmt: skip
        h.store.cancel(HOST, QUEUE, task.id, settings=ARCHIVING, now=T0 + n * SECOND + 1)
    folder = {name: orjson.loads(body) for name, body in h.archive(task.id).items()}
    assert folder["0-posted.item.json"] == {"url": "v1"}
    assert folder["1-retried.item.json"] == {"url": "v2"}
    assert folder["1-retried-2.item.json"] == {"url": "v3"}
    assert folder["item.json"] == {"url": "v3"}
    new = h.store.repost(HOST, QUEUE, task.id, settings=ARCHIVING, now=T0 + 9 * SECOND).task
    assert new.item == {"url": "v3"}


def test_a_finished_tasks_folder_has_the_seeds_files_and_each_attempts_own(h):
    """tasks-payloads/<host>/<queue>/<id>/item.json and result.json, as the seed shows them,
    each the latest body of its kind; each attempt's body beside them, as it was."""
    task = _failed(h, ARCHIVING, item={"url": "a"})
    h.store.retry(HOST, QUEUE, task.id, settings=ARCHIVING, now=T0 + 3 * SECOND)
    h.claim(settings=ARCHIVING, now=T0 + 4 * SECOND)
    h.store.finish(HOST, QUEUE, task.id, settings=ARCHIVING, worker="box-1", attempt=2,
                   result={"ok": 2}, now=T0 + 5 * SECOND)  # fmt: skip
    folder = {name: orjson.loads(body) for name, body in h.archive(task.id).items()}
    assert folder["item.json"] == {"url": "a"}
    assert folder["result.json"] == {"ok": 2}
    assert folder["1-failed.result.json"] == {"why": "bad url"}
    assert folder["2-result.result.json"] == {"ok": 2}
    assert "0-posted.item.json" not in folder  # no edit: item.json is the posted item


def test_repost_without_an_archive_is_refused(h):
    task = _failed(h)  # the queue does not archive payloads
    events = h.events()
    with pytest.raises(NotArchived) as refused:
        h.store.repost(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 3 * SECOND, by="olga")
    assert refused.value.code == "not_archived" and h.events() == events


@pytest.mark.files_only("a symlink in the archive folder: the PostgreSQL archive is rows")
def test_repost_refuses_an_archive_symlinked_elsewhere(h, tmp_path):
    task = _failed(h, ARCHIVING)
    outside = tmp_path / "outside.json"
    outside.write_bytes(b'{"secret": 1}')
    item = _archive(h, task.id) / "item.json"
    item.unlink()
    item.symlink_to(outside)
    with pytest.raises(NotArchived):
        h.store.repost(HOST, QUEUE, task.id, settings=ARCHIVING, now=T0 + 3 * SECOND)


def test_a_reposted_item_is_checked_against_the_queues_settings_now(h):
    old = _failed(h, ARCHIVING, item={"other": "x"})
    strict = replace(SCHEMA, archive_payloads=True)
    with pytest.raises(InvalidItem):
        h.store.repost(HOST, QUEUE, old.id, settings=strict, now=T0 + 3 * SECOND, by="olga")


def test_the_operators_triples_are_in_the_table(h):
    assert (State.PROCESSING, State.PENDING, "requeued") in TRANSITIONS
    assert {(s, None, "deleted") for s in State if s.terminal} <= TRANSITIONS
    requeues = {(s, t) for s, t, event in TRANSITIONS if event == "requeued"}
    assert requeues == {(State.PROCESSING, State.PENDING)}
    hastens = {(s, t) for s, t, event in TRANSITIONS if event == "hastened"}
    assert hastens == {(State.PENDING, State.PENDING)}


def test_a_stop_asked_of_a_running_task_names_the_operator_on_the_line_that_ends_it(h):
    task = h.post()
    h.claim()
    h.store.cancel(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 2 * SECOND, by="olga")
    assert h.event_names(task.id) == ["posted", "claimed"]  # the request itself writes no line
    assert "cancelRequestedBy" not in h.store.read(HOST, QUEUE, task.id).status_view()
    h.store.fail(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1,
                 cancelled=True, now=T0 + 3 * SECOND)  # fmt: skip
    line = h.events(task.id)[-1]
    assert (line["event"], line["by"], line["worker"]) == ("cancelled", "olga", "box-1")
    # a retry forgets who stopped it: the next cancel is someone else's, or an owner's
    h.store.retry(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 4 * SECOND)
    assert h.store.read(HOST, QUEUE, task.id).cancel_requested_by is None
    assert "by" not in h.events(task.id)[-1]


def test_an_edit_of_a_task_posted_before_the_queue_archived_keeps_just_the_edit(h):
    task = _failed(h, SETTINGS, item={"url": "v1"})  # posted and failed without an archive
    h.store.retry(HOST, QUEUE, task.id, settings=ARCHIVING, now=T0 + 3 * SECOND,
                  item={"url": "v2"})  # fmt: skip
    folder = {name: orjson.loads(body) for name, body in h.archive(task.id).items()}
    assert folder == {"1-retried.item.json": {"url": "v2"}, "item.json": {"url": "v2"}}
