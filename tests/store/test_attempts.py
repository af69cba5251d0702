"""An attempt's life beyond the happy path: retries and their queue-timeout window, a cancel
that meets a dead worker, heartbeats, each attempt's archived bodies, and a report sent twice."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from queues.store import LeaseLost, State, sweep_queue

from .conftest import HOST, QUEUE, SETTINGS, T0

SECOND, HOUR, DAY = 1000, 3_600_000, 86_400_000
QUEUE_MS = SETTINGS.queue_seconds * 1000  # a day


def fail(h, task_id, *, attempt=1, worker="box-1", settings=SETTINGS, **kw):
    return h.store.fail(
        HOST, QUEUE, task_id, settings=settings, worker=worker, attempt=attempt, **kw
    )


def finish(h, task_id, *, attempt=1, worker="box-1", settings=SETTINGS, **kw):
    return h.store.finish(
        HOST, QUEUE, task_id, settings=settings, worker=worker, attempt=attempt, **kw
    )


def beat(h, task_id, *, now, attempt=1, settings=SETTINGS, **kw):
    return h.store.progress(
        HOST, QUEUE, task_id, settings=settings, worker="box-1", attempt=attempt, now=now, **kw
    )


def sweep(h, now, settings=SETTINGS):
    return sweep_queue(h.store, HOST, QUEUE, settings, now=now)


# --- a retry starts a fresh queue-timeout window ----------------------------------------------


def test_a_task_retried_a_day_later_is_not_timed_out_by_the_next_sweep(h):
    task = h.post(now=T0)
    h.claim(now=T0 + SECOND)
    fail(h, task.id, result={"why": "upstream down"}, now=T0 + 2 * SECOND)
    retried_at = T0 + DAY + HOUR
    retried = h.store.retry(HOST, QUEUE, task.id, settings=SETTINGS, now=retried_at)
    report = sweep(h, retried_at + SECOND)
    assert report.timeout == 0 and h.where(task.id) == ["pending"]
    assert retried.requeued_at == retried_at and retried.posted_at == T0
    assert h.on_disk(task.id)["pending"]["requeuedAt"] == retried_at
    view = retried.status_view()
    assert (view["postedAt"], view["requeuedAt"]) == (T0, retried_at)
    assert sweep(h, retried_at + QUEUE_MS).timeout == 0  # the window's last instant
    assert sweep(h, retried_at + QUEUE_MS + 1).timeout == 1
    assert h.on_disk(task.id)["done"]["error"] == "timeout"


def test_a_backoff_requeue_starts_a_fresh_window(h):
    s = replace(SETTINGS, queue_seconds=3600, max_attempts=3, backoff_seconds=5)
    task = h.post(settings=s, now=T0)
    h.claim(settings=s, now=T0 + 3000 * SECOND)
    requeued_at = T0 + 3590 * SECOND
    fail(h, task.id, settings=s, result={"e": 1}, retry=True, now=requeued_at)
    assert sweep(h, T0 + 3700 * SECOND, s).timeout == 0  # past postedAt + 1 h, not the retry's
    again = h.store.read(HOST, QUEUE, task.id)
    assert again.status is State.PENDING and again.requeued_at == requeued_at
    second = h.claim(settings=s, now=T0 + 3700 * SECOND)
    assert second.attempts == 2 and second.requeued_at == requeued_at
    assert sweep(h, requeued_at + 3600 * SECOND + 1, s).timeout == 1


def test_without_an_attempt_budget_a_retrying_worker_cannot_outlive_the_queue_timeout(h):
    """maxAttempts 0 lets fail(retry) requeue forever: the queue timeout is then the only end,
    so such a requeue keeps the window it had."""
    s = replace(SETTINGS, queue_seconds=3600, max_attempts=0, backoff_seconds=5)
    task = h.post(settings=s, now=T0)
    h.claim(settings=s, now=T0 + 3000 * SECOND)
    fail(h, task.id, settings=s, retry=True, now=T0 + 3590 * SECOND)
    assert sweep(h, T0 + 3600 * SECOND + 1, s).timeout == 1
    assert "requeuedAt" not in h.on_disk(task.id)["done"]


def test_a_lapsed_lease_requeue_keeps_the_window(h):
    task = h.post(now=T0)
    h.claim(now=T0 + SECOND)
    assert sweep(h, T0 + 2 * HOUR).requeue == 1
    assert h.store.read(HOST, QUEUE, task.id).status is State.PENDING
    assert "requeuedAt" not in h.on_disk(task.id)["pending"]
    assert sweep(h, T0 + QUEUE_MS + 1).timeout == 1


# --- a cancel requested of a task whose worker died ---------------------------------------------


@pytest.mark.parametrize("max_attempts", [0, 1])
def test_a_lapsed_lease_ends_a_cancel_requested_task_cancelled(h, max_attempts):
    s = replace(SETTINGS, max_attempts=max_attempts)
    task = h.post(settings=s, now=T0)
    claimed = h.claim(settings=s, now=T0 + SECOND)
    h.store.cancel(HOST, QUEUE, task.id, settings=s, now=T0 + 2 * SECOND)
    at = claimed.lease.until
    report = sweep(h, at, s)
    assert h.where(task.id) == ["done"]
    assert (report.cancelled, report.requeue, report.failed) == (1, 0, 0)
    record = h.on_disk(task.id)["done"]
    assert record["status"] == "cancelled" and record["finishedAt"] == at
    assert record["lease"] is None and record["error"] is None
    assert h.event_names(task.id)[-1] == "cancelled"
    assert h.events(task.id)[-1]["worker"] == "box-1"  # whose lease lapsed
    assert h.claim(settings=s, now=at + SECOND) is None  # it never runs again


# --- a heartbeat is no event --------------------------------------------------------------------


def test_heartbeats_extend_the_lease_and_write_no_event_and_no_archive_line(h):
    s = replace(SETTINGS, archive_payloads=True)
    task = h.post(settings=s, now=T0)
    h.claim(settings=s, now=T0 + SECOND)
    lines = len(h.events())
    for n in range(1, 6):
        beaten = beat(h, task.id, settings=s, now=T0 + n * 20 * SECOND)
        assert beaten.lease.until == T0 + n * 20 * SECOND + 60 * SECOND
        assert h.on_disk(task.id)["processing"]["lease"]["until"] == beaten.lease.until
    assert len(h.events()) == lines
    assert "progress.jsonl" not in h.archive(task.id)
    told = beat(h, task.id, settings=s, progress={"percent": 50}, now=T0 + 200 * SECOND)
    assert told.progress == {"percent": 50}
    assert [e["event"] for e in h.events()[lines:]] == ["progress"]
    assert h.archive(task.id)["progress.jsonl"] == b'{"percent":50}\n'


# --- each attempt's bodies are archived apart ---------------------------------------------------


def test_each_attempts_failure_is_archived_on_its_own(h):
    s = replace(SETTINGS, archive_payloads=True, max_attempts=3, backoff_seconds=1)
    task = h.post(settings=s, now=T0)
    for attempt in (1, 2):
        at = T0 + attempt * HOUR
        h.claim(settings=s, now=at)
        fail(h, task.id, settings=s, attempt=attempt, result={"e": attempt}, retry=True, now=at + 1)
    h.claim(settings=s, now=T0 + 3 * HOUR)
    finish(h, task.id, settings=s, attempt=3, result={"r": 3}, now=T0 + 3 * HOUR + 1)
    folder = h.archive(task.id)
    bodies = {
        (e["attempts"], e["event"]): orjson.loads(
            folder[f"{e['attempts']}-{e['event']}.result.json"]
        )
        for e in h.events(task.id)
        if "result" in e["archived"]
    }
    assert bodies == {(1, "requeue"): {"e": 1}, (2, "requeue"): {"e": 2}, (3, "result"): {"r": 3}}
    assert orjson.loads(folder["result.json"]) == {"r": 3}  # the seed's file: the latest


def test_a_timeout_after_a_failure_of_the_same_attempt_overwrites_nothing(h):
    """Attempt 1 fails past its budget ("attempts"), an operator retries, and the task times
    out before anyone claims it: two errors of attempt 1, two files."""
    s = replace(SETTINGS, archive_payloads=True, max_attempts=1)
    task = h.post(settings=s, now=T0)
    h.claim(settings=s, now=T0 + SECOND)
    fail(h, task.id, settings=s, result={"e": 1}, retry=True, now=T0 + 2 * SECOND)
    h.store.retry(HOST, QUEUE, task.id, settings=s, now=T0 + 3 * SECOND)
    assert sweep(h, T0 + 3 * SECOND + QUEUE_MS + 1, s).timeout == 1
    folder = h.archive(task.id)
    assert folder["1-failed.error.json"] == b'"attempts"'
    assert folder["1-failed.result.json"] == b'{"e":1}'
    assert folder["1-timeout.error.json"] == b'"timeout"'
    archived = [(e["event"], e["attempts"], e["archived"]) for e in h.events(task.id)]
    assert archived == [
        ("posted", 0, ["item"]),
        ("claimed", 1, []),
        ("failed", 1, ["result", "error"]),
        ("retried", 1, []),
        ("timeout", 1, ["error"]),
    ]


# --- the same report twice ----------------------------------------------------------------------


def test_the_same_result_twice_is_a_replay_that_changes_nothing(h):
    task = h.post(now=T0)
    h.claim(now=T0 + SECOND)
    first = finish(h, task.id, result={"bytes": 2048, "at": [1, 2]}, now=T0 + 2 * SECOND)
    assert not first.replayed and first.task.status is State.FINISHED
    assert h.on_disk(task.id)["done"]["endedBy"] == "box-1"
    disk, lines = h.on_disk(task.id), len(h.events())
    # the same JSON, its keys in another order: the same body
    again = finish(h, task.id, result={"at": [1, 2], "bytes": 2048}, now=T0 + 3 * SECOND)
    assert again.replayed and again.task == first.task
    assert h.on_disk(task.id) == disk and len(h.events()) == lines


@pytest.mark.parametrize(
    ("worker", "attempt", "result"),
    [
        ("box-1", 1, {"bytes": 2049}),  # another body
        ("box-1", 1, {"bytes": 2048.0}),  # another number, however equal in Python
        ("box-2", 1, {"bytes": 2048}),  # another worker
        ("box-1", 2, {"bytes": 2048}),  # another attempt
    ],
)
def test_a_different_result_after_the_end_is_still_lease_lost(h, worker, attempt, result):
    task = h.post(now=T0)
    h.claim(now=T0 + SECOND)
    finish(h, task.id, result={"bytes": 2048}, now=T0 + 2 * SECOND)
    disk = h.on_disk(task.id)
    with pytest.raises(LeaseLost):
        finish(h, task.id, worker=worker, attempt=attempt, result=result, now=T0 + 3 * SECOND)
    with pytest.raises(LeaseLost):  # a finished task is no failure either
        fail(h, task.id, result={"bytes": 2048}, now=T0 + 3 * SECOND)
    assert h.on_disk(task.id) == disk


def test_the_same_failure_twice_is_a_replay_plain_and_cancelled(h):
    plain = h.post(now=T0)
    h.claim(now=T0 + SECOND)
    first = fail(h, plain.id, result={"why": "bad"}, now=T0 + 2 * SECOND)
    again = fail(h, plain.id, result={"why": "bad"}, now=T0 + 3 * SECOND)
    assert again.replayed and again.task == first.task and again.task.status is State.FAILED
    with pytest.raises(LeaseLost):
        fail(h, plain.id, result={"why": "other"}, now=T0 + 3 * SECOND)
    with pytest.raises(LeaseLost):
        fail(h, plain.id, result={"why": "bad"}, cancelled=True, now=T0 + 3 * SECOND)

    cancelled = h.post(now=T0)
    h.claim(now=T0 + SECOND)
    h.store.cancel(HOST, QUEUE, cancelled.id, settings=SETTINGS, now=T0 + 2 * SECOND)
    first = fail(h, cancelled.id, cancelled=True, now=T0 + 3 * SECOND)
    again = fail(h, cancelled.id, cancelled=True, now=T0 + 4 * SECOND)
    assert again.replayed and again.task.status is State.CANCELLED
    with pytest.raises(LeaseLost):
        fail(h, cancelled.id, now=T0 + 4 * SECOND)  # a plain failure is another outcome
    assert h.event_names(cancelled.id) == ["posted", "claimed", "cancelled"]


def test_a_retried_failure_replays_until_the_task_is_claimed_again(h):
    s = replace(SETTINGS, max_attempts=3, backoff_seconds=5)
    task = h.post(settings=s, now=T0)
    h.claim(settings=s, now=T0 + SECOND)
    first = fail(h, task.id, settings=s, result={"e": 1}, retry=True, now=T0 + 2 * SECOND)
    assert first.task.status is State.PENDING
    again = fail(h, task.id, settings=s, result={"e": 1}, retry=True, now=T0 + 3 * SECOND)
    assert again.replayed and again.task == first.task
    with pytest.raises(LeaseLost):  # without retry it would have failed for good
        fail(h, task.id, settings=s, result={"e": 1}, now=T0 + 3 * SECOND)
    h.claim(settings=s, worker="box-2", now=T0 + 10 * SECOND)
    with pytest.raises(LeaseLost):  # attempt 2 is box-2's now: attempt 1's outcome is history
        fail(h, task.id, settings=s, result={"e": 1}, retry=True, now=T0 + 11 * SECOND)
    assert h.event_names(task.id) == ["posted", "claimed", "requeue", "claimed"]


def test_a_failure_replayed_after_an_operators_retry_is_lease_lost(h):
    """The operator's retry, not the worker's report, made the record what it is now."""
    s = replace(SETTINGS, max_attempts=3, backoff_seconds=5)
    retried = h.post(settings=replace(s, max_attempts=1), now=T0)
    h.claim(settings=s, now=T0 + SECOND)
    fail(h, retried.id, settings=s, result={"e": 1}, retry=True, now=T0 + 2 * SECOND)
    h.store.retry(HOST, QUEUE, retried.id, settings=s, now=T0 + 3 * SECOND)
    with pytest.raises(LeaseLost):  # pending again, lastError {"e": 1}: but by the operator
        fail(h, retried.id, settings=s, result={"e": 1}, retry=True, now=T0 + 4 * SECOND)
    assert "endedBy" not in h.on_disk(retried.id)["pending"]


def test_a_failure_replayed_after_its_task_timed_out_is_lease_lost(h):
    s = replace(SETTINGS, max_attempts=3, backoff_seconds=5)
    timed_out = h.post(settings=s, now=T0)
    h.claim(settings=s, now=T0 + SECOND)
    fail(h, timed_out.id, settings=s, retry=True, now=T0 + 2 * SECOND)
    assert sweep(h, T0 + 2 * SECOND + QUEUE_MS + 1, s).timeout == 1
    with pytest.raises(LeaseLost):  # no body: the timed-out record's null result must not match
        fail(h, timed_out.id, settings=s, retry=True, now=T0 + QUEUE_MS + 5 * SECOND)


def test_an_operators_retry_starts_the_backoff_from_its_beginning(h):
    """Issue 36: a task retried after its budget was spent waited the capped delay (300 s) on
    its next failure, as if its attempts went on counting; the retry is a fresh start."""
    s = replace(SETTINGS, max_attempts=3, backoff_seconds=5, backoff_factor=4)
    task = h.post(settings=s, now=T0)
    now = T0
    for attempt in (1, 2, 3):
        now = h.store.read(HOST, QUEUE, task.id).available_at + SECOND
        h.claim(settings=s, now=now)
        fail(h, task.id, settings=s, attempt=attempt, result={"e": attempt}, retry=True, now=now)
    assert h.store.read(HOST, QUEUE, task.id).status is State.FAILED  # 3 of 3 used up
    h.store.retry(HOST, QUEUE, task.id, settings=s, now=now + SECOND)
    h.claim(settings=s, now=now + 2 * SECOND)
    failed_at = now + 3 * SECOND
    again = fail(h, task.id, settings=s, attempt=4, result={"e": 4}, retry=True, now=failed_at)
    assert again.task.status is State.PENDING and again.task.attempts == 4
    assert again.task.available_at == failed_at + 5 * SECOND  # the first delay, not 5 * 4**3
    assert "retriedAfter" not in again.task.status_view() | again.task.full_view()
    h.claim(settings=s, now=failed_at + 5 * SECOND)
    later = fail(h, task.id, settings=s, attempt=5, result={"e": 5}, retry=True,
                 now=failed_at + 6 * SECOND)  # fmt: skip
    assert later.task.available_at == failed_at + 6 * SECOND + 20 * SECOND  # then 5 * 4


def test_each_failure_line_says_why_its_own_attempt_failed(h):
    """Issue 36: the record keeps only the latest attempt's body (and an operator's retry
    clears even that), so a retried attempt's error was lost to Task Logs. Each failure's
    line now says why in one line, whatever the task does after."""
    s = replace(SETTINGS, max_attempts=2, backoff_seconds=1)
    task = h.post(settings=s, now=T0)
    bodies = [{"error": "first\nstack"}, {"error": "second"}, {"error": "third\x00"}]
    for attempt, body in enumerate(bodies, 1):
        at = T0 + attempt * HOUR
        if attempt == 3:
            h.store.retry(HOST, QUEUE, task.id, settings=s, now=at - 1)
        h.claim(settings=s, now=at)
        fail(h, task.id, settings=s, attempt=attempt, result=body, retry=True, now=at + 1)
    h.claim(settings=s, now=T0 + 5 * HOUR)  # attempt 4, the last: its lease lapses
    sweep(h, T0 + 5 * HOUR + SETTINGS.lease_seconds * SECOND + 1, s)
    ended = [
        (e["event"], e["attempts"], e.get("reason"), e.get("lapsed", False))
        for e in h.events(task.id)
        if e["event"] in ("requeue", "failed")
    ]
    assert ended == [
        ("requeue", 1, "first", False),
        ("failed", 2, "second", False),  # its budget spent: the body, not the word "attempts"
        ("requeue", 3, "third\N{REPLACEMENT CHARACTER}", False),
        ("failed", 4, "attempts", True),  # no report of its own: the store's word
    ]
    assert "reason" not in h.events(task.id)[0]  # a posted line has none
