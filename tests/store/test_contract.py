"""Every transition of store.md's table, and every refused one: the answer, the files, the log."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from queues.store import (
    ANY,
    IdempotencyKeyReused,
    InvalidItem,
    InvalidName,
    InvalidRequest,
    LeaseLost,
    NotCancellable,
    NotFound,
    NotRetryable,
    PayloadTooLarge,
    QueueFull,
    QueueSettings,
    State,
    StoreError,
    sweep_queue,
)

from .conftest import HOST, QUEUE, SETTINGS, T0

MIN = 60_000


def test_post_writes_one_pending_file_and_a_posted_line(h):
    task = h.post({"url": "https://ex.com/a.png"})
    assert len(task.id) == 16 and int(task.id, 16) >= 0
    assert task.status is State.PENDING and task.attempts == 0 and task.lease is None
    disk = h.on_disk(task.id)
    assert list(disk) == ["pending"]
    assert disk["pending"] == task.to_record()
    assert disk["pending"]["postedBy"] == "alice" and disk["pending"]["postedAt"] == T0
    [line] = h.events(task.id)
    assert line["event"] == "posted" and line["status"] == "pending" and line["worker"] is None
    assert line["t"] == T0 // 1000 and line["at"].endswith("Z")
    assert line["bytes"] == {
        "item": len(b'{"url":"https://ex.com/a.png"}'),
        "progress": 0,
        "result": 0,
        "error": 0,
    }
    assert line["archived"] == []


def test_record_has_the_spec_fields_and_ext_fields_only_when_set(h):
    no_budget = QueueSettings(max_attempts=0)  # a budget is an ext field: maxAttempts
    record = h.on_disk(h.post(settings=no_budget).id)["pending"]
    spec = {
        "id",
        "host",
        "queue",
        "status",
        "item",
        "postedBy",
        "postedAt",
        "updatedAt",
        "attempts",
        "lease",
        "progress",
        "result",
        "error",
        "finishedAt",
        "fetchedAt",
    }
    # a file's record also holds its post sequence, which a PostgreSQL row keeps in a column
    assert set(record) - {"seq"} == spec | {"rev"}
    assert h.on_disk(h.post().id)["pending"]["maxAttempts"] == 3  # a new queue's budget
    delayed = h.on_disk(h.post(priority=5, delay_seconds=3).id)["pending"]
    assert delayed["priority"] == 5 and delayed["availableAt"] == T0 + 3000


def test_claim_renames_to_processing_with_lease_and_attempt(h):
    task = h.post()
    claimed = h.claim(now=T0 + 1000)
    assert claimed.id == task.id and claimed.status is State.PROCESSING
    assert claimed.attempts == 1 and claimed.lease.worker == "box-1"
    assert claimed.lease.until == T0 + 1000 + SETTINGS.lease_seconds * 1000
    assert h.where(task.id) == ["processing"]
    assert h.on_disk(task.id)["processing"]["status"] == "processing"
    assert h.event_names(task.id) == ["posted", "claimed"]
    assert h.events(task.id)[-1]["worker"] == "box-1"
    assert h.claim() is None  # empty queue: nothing, not an error


def test_claim_order_priority_then_oldest_and_skips_delayed(h):
    old = h.post(now=T0)
    new = h.post(now=T0 + 1)
    urgent = h.post(now=T0 + 2, priority=10)
    later = h.post(now=T0 + 3, priority=50, delay_seconds=60)
    order = [h.claim(now=T0 + 10).id for _ in range(3)]
    assert order == [urgent.id, old.id, new.id]
    assert h.claim(now=T0 + 10) is None
    assert h.claim(now=T0 + 3 + MIN).id == later.id


def test_claim_many_and_lease_bounds(h):
    ids = {h.post().id for _ in range(3)}
    got = h.store.claim(HOST, QUEUE, settings=SETTINGS, worker="w", max_tasks=5, now=T0 + 1)
    assert {t.id for t in got} == ids
    for bad in (0, 101):
        with pytest.raises(InvalidRequest):
            h.store.claim(HOST, QUEUE, settings=SETTINGS, worker="w", max_tasks=bad, now=T0)
    with pytest.raises(InvalidRequest):
        h.claim(lease_seconds=SETTINGS.queue_seconds + 1)
    with pytest.raises(InvalidRequest):
        h.claim(worker="")


@pytest.mark.parametrize("bad", ["\u202e", "\ufeff", "\x00", "\u00a0"])
def test_a_worker_name_and_a_concurrency_key_follow_one_rule(h, bad):
    """The one rule for names (names.py): a bidi override, a byte order mark, a NUL or a
    no-break space is refused in a worker's name as in a concurrency key, naming the field
    and the code point; nothing is claimed or posted."""
    task = h.post()
    for field, call in (
        ("worker", lambda: h.claim(worker=f"box{bad}1")),
        ("concurrencyKey", lambda: h.post(concurrency_key=f"key{bad}1")),
    ):
        with pytest.raises(InvalidRequest) as refused:
            call()
        assert refused.value.detail.startswith(f"{field} must not hold control, format")
        assert f"U+{ord(bad):04X} at position 3" in refused.value.detail
    assert h.claim(worker="box 1").id == task.id  # the one task: nothing else was posted


def test_paused_queue_claims_nothing_but_accepts_posts(h):
    paused = replace(SETTINGS, paused=True)
    task = h.post(settings=paused)
    assert h.claim(settings=paused) is None
    assert h.claim().id == task.id


def test_progress_extends_lease_and_logs(h):
    task = h.post()
    claimed = h.claim(now=T0 + 1000)
    after = h.store.progress(
        HOST,
        QUEUE,
        task.id,
        settings=SETTINGS,
        worker="box-1",
        attempt=1,
        progress={"percent": 40},
        now=T0 + 30_000,
    )
    assert after.progress == {"percent": 40}
    assert after.lease.until == T0 + 30_000 + 60_000 > claimed.lease.until
    assert h.on_disk(task.id)["processing"]["progress"] == {"percent": 40}
    line = h.events(task.id)[-1]
    assert line["event"] == "progress" and line["bytes"]["progress"] == len(b'{"percent":40}')
    only_lease = h.store.progress(
        HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1, now=T0 + 40_000
    )
    assert only_lease.progress == {"percent": 40} and only_lease.lease.until == T0 + 100_000


def test_progress_extends_by_the_claims_own_lease_length(h):
    task = h.post()
    claimed = h.claim(now=T0 + 1000, lease_seconds=5)
    assert claimed.lease.until == T0 + 6000
    assert h.on_disk(task.id)["processing"]["leaseSeconds"] == 5
    beat = h.store.progress(
        HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1, now=T0 + 4000
    )
    assert beat.lease.until == T0 + 9000  # the claim's 5 s, not the queue's 60 s
    longer = h.store.progress(
        HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1, lease_seconds=30,
        now=T0 + 5000,
    )  # fmt: skip
    assert longer.lease.until == T0 + 35_000


def test_progress_lease_is_clamped_to_a_queue_timeout_lowered_since_the_claim(h):
    task = h.post()
    h.claim(now=T0 + 1000, lease_seconds=600)
    lowered = replace(SETTINGS, queue_seconds=100)
    beat = h.store.progress(
        HOST, QUEUE, task.id, settings=lowered, worker="box-1", attempt=1, now=T0 + 2000
    )
    assert beat.lease.until == T0 + 2000 + 100_000


def test_finish_moves_to_done_and_a_result_is_never_overwritten(h):
    task = h.post()
    h.claim()
    done = h.store.finish(
        HOST,
        QUEUE,
        task.id,
        settings=SETTINGS,
        worker="box-1",
        attempt=1,
        result={"bytes": 2048},
        now=T0 + 5000,
    ).task
    assert done.status is State.FINISHED and done.finished_at == T0 + 5000 and done.lease is None
    assert h.where(task.id) == ["done"]
    assert h.on_disk(task.id)["done"]["result"] == {"bytes": 2048}
    assert h.events(task.id)[-1]["event"] == "result"
    assert h.events(task.id)[-1]["worker"] == "box-1"
    for call in (h.store.finish, h.store.fail):
        with pytest.raises(LeaseLost):
            call(
                HOST,
                QUEUE,
                task.id,
                settings=SETTINGS,
                worker="box-1",
                attempt=1,
                result={"again": 1},
                now=T0 + 6000,
            )
    assert h.on_disk(task.id)["done"]["result"] == {"bytes": 2048}
    assert h.event_names(task.id) == ["posted", "claimed", "result"]


def test_fail_moves_to_done_failed_with_result_as_the_error_body(h):
    task = h.post()
    h.claim()
    failed = h.store.fail(
        HOST,
        QUEUE,
        task.id,
        settings=SETTINGS,
        worker="box-1",
        attempt=1,
        result={"why": "bad png"},
        now=T0 + 5000,
    ).task
    assert failed.status is State.FAILED and failed.error is None
    assert h.on_disk(task.id)["done"]["result"] == {"why": "bad png"}
    assert h.events(task.id)[-1]["event"] == "failed"


def test_fail_with_retry_requeues_after_backoff_then_fails_past_the_budget(h):
    s = replace(SETTINGS, max_attempts=2, backoff_seconds=5, backoff_factor=4)
    task = h.post(settings=s)
    h.claim(settings=s, now=T0)
    again = h.store.fail(
        HOST,
        QUEUE,
        task.id,
        settings=s,
        worker="box-1",
        attempt=1,
        result={"e": 1},
        retry=True,
        now=T0 + 1000,
    ).task
    assert again.status is State.PENDING and again.available_at == T0 + 6000
    assert again.last_error == {"e": 1} and h.where(task.id) == ["pending"]
    assert h.events(task.id)[-1]["event"] == "requeue"
    stats = h.store.stats(HOST, QUEUE, now=T0 + 2000)
    assert stats.pending == 1 and stats.retrying == 1 and stats.delayed == 0
    assert h.claim(settings=s, now=T0 + 5999) is None
    second = h.claim(settings=s, now=T0 + 6000)
    assert second.attempts == 2
    last = h.store.fail(
        HOST, QUEUE, task.id, settings=s, worker="box-1", attempt=2, retry=True, now=T0 + 7000
    ).task
    assert last.status is State.FAILED and last.error == "attempts"


def test_fencing_wrong_worker_or_attempt_changes_nothing(h):
    task = h.post()
    h.claim(now=T0)
    before = h.on_disk(task.id)
    for worker, attempt in (("box-2", 1), ("box-1", 2), ("box-1", 0)):
        with pytest.raises(LeaseLost) as err:
            h.store.finish(
                HOST,
                QUEUE,
                task.id,
                settings=SETTINGS,
                worker=worker,
                attempt=attempt,
                result={},
                now=T0 + 1,
            )
        assert err.value.code == "lease_lost"
        with pytest.raises(LeaseLost):
            h.store.progress(
                HOST, QUEUE, task.id, settings=SETTINGS, worker=worker, attempt=attempt, now=T0 + 1
            )
    assert h.on_disk(task.id) == before
    assert h.event_names(task.id) == ["posted", "claimed"]


def test_lapsed_worker_cannot_overwrite_the_reclaimer(h):
    task = h.post()
    h.claim(now=T0, worker="slow")
    report = sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 61_000)
    assert report.requeue == 1 and h.where(task.id) == ["pending"]
    assert h.events(task.id)[-1]["event"] == "requeue"
    assert h.events(task.id)[-1]["worker"] == "slow"
    fast = h.claim(now=T0 + 62_000, worker="fast")
    assert fast.attempts == 2
    with pytest.raises(LeaseLost):
        h.store.finish(
            HOST,
            QUEUE,
            task.id,
            settings=SETTINGS,
            worker="slow",
            attempt=1,
            result={"late": True},
            now=T0 + 63_000,
        )
    h.store.finish(
        HOST,
        QUEUE,
        task.id,
        settings=SETTINGS,
        worker="fast",
        attempt=2,
        result={"ok": True},
        now=T0 + 63_000,
    )
    assert h.on_disk(task.id)["done"]["result"] == {"ok": True}


def test_a_claim_that_read_the_clock_before_a_requeue_begins_after_it(h):
    # the race chaos met: a claim reads the clock, waits behind the sweep's requeue of the
    # task (its lock, a row's commit), then takes it; its attempt must not start "before" the
    # requeue that ended the last one, or the history reads as a claim of a processing task.
    # Here the requeue is stamped a minute ahead of the live clock the claim then reads.
    posted_at = int(time.time() * 1000)
    task = h.post(now=posted_at)
    h.claim(now=posted_at, worker="slow")
    requeued_at = posted_at + 61_000
    sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=requeued_at)
    late = h.claim(now=None, worker="fast")  # the live clock: a minute before the requeue
    assert late.attempts == 2 and late.claimed_at == late.updated_at == requeued_at
    lease_ms = SETTINGS.lease_seconds * 1000
    assert late.lease is not None and late.lease.until == requeued_at + lease_ms
    requeue, claim = h.events(task.id)[-2:]
    assert (requeue["event"], claim["event"]) == ("requeue", "claimed")
    assert requeue["at"] <= claim["at"]


def test_a_claim_at_a_time_given_is_stamped_at_that_time(h):
    # a caller's own clock (the tests', a replay's) is taken as it is
    h.post(now=T0 + 5_000)
    task = h.claim(now=T0 + 1_000)
    assert task.claimed_at == task.updated_at == T0 + 1_000


def test_unclaim_gives_a_claim_back_pending_with_its_attempt_uncounted(h):
    """A claim whose caller left before it heard of it: pending again at once, as it was
    before the claim (attempts 0, no lease), an `unclaimed` line naming the worker; the next
    claim is attempt 1 again, so the budget lost nothing."""
    task = h.post(settings=replace(SETTINGS, max_attempts=1))
    h.claim(now=T0 + 1000)
    back = h.store.unclaim(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1,
                           now=T0 + 1500)  # fmt: skip
    assert back.status is State.PENDING and back.attempts == 0 and back.lease is None
    assert back.updated_at == T0 + 1500 and back.max_attempts == 1
    assert h.where(task.id) == ["pending"]
    assert h.store.read(HOST, QUEUE, task.id) == back
    assert h.event_names(task.id) == ["posted", "claimed", "unclaimed"]
    line = h.events(task.id)[-1]
    assert (line["status"], line["attempts"], line["worker"]) == ("pending", 0, "box-1")
    again = h.claim(now=T0 + 2000, worker="box-2")
    assert (again.id, again.attempts) == (task.id, 1)


def test_unclaim_is_fenced_and_a_cancel_asked_meanwhile_ends_it(h):
    task = h.post()
    with pytest.raises(LeaseLost):  # not claimed: nothing to give back
        h.store.unclaim(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1)
    h.claim(now=T0 + 1000)
    before = h.on_disk(task.id)
    for worker, attempt in (("box-2", 1), ("box-1", 0), ("box-1", 2)):
        with pytest.raises(LeaseLost):
            h.store.unclaim(HOST, QUEUE, task.id, settings=SETTINGS, worker=worker,
                            attempt=attempt)  # fmt: skip
    assert h.on_disk(task.id) == before
    h.store.cancel(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 1100)
    ended = h.store.unclaim(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1",
                            attempt=1, now=T0 + 1200)  # fmt: skip
    assert ended.status is State.CANCELLED and ended.attempts == 0 and ended.lease is None
    assert h.event_names(task.id)[-1] == "cancelled"


def test_cancel_pending_processing_and_terminal(h):
    pending = h.post(now=T0)
    cancelled = h.store.cancel(HOST, QUEUE, pending.id, settings=SETTINGS, now=T0 + 1)
    assert cancelled.status is State.CANCELLED and h.where(pending.id) == ["done"]
    assert h.events(pending.id)[-1]["event"] == "cancelled"
    with pytest.raises(NotCancellable):
        h.store.cancel(HOST, QUEUE, pending.id, settings=SETTINGS, now=T0 + 2)

    running = h.post(now=T0 + 3)
    h.claim(now=T0 + 4)
    requested = h.store.cancel(HOST, QUEUE, running.id, settings=SETTINGS, now=T0 + 5)
    assert requested.status is State.PROCESSING and requested.cancel_requested
    assert h.on_disk(running.id)["processing"]["cancelRequested"] is True
    assert h.event_names(running.id) == ["posted", "claimed"]  # recorded, no event
    told = h.store.progress(
        HOST, QUEUE, running.id, settings=SETTINGS, worker="box-1", attempt=1, now=T0 + 6
    )
    assert told.cancel_requested
    ended = h.store.fail(
        HOST,
        QUEUE,
        running.id,
        settings=SETTINGS,
        worker="box-1",
        attempt=1,
        cancelled=True,
        now=T0 + 7,
    ).task
    assert ended.status is State.CANCELLED and h.where(running.id) == ["done"]
    assert h.events(running.id)[-1]["event"] == "cancelled"


def test_fail_cancelled_without_a_request_is_refused(h):
    task = h.post()
    h.claim()
    with pytest.raises(InvalidRequest):
        h.store.fail(
            HOST,
            QUEUE,
            task.id,
            settings=SETTINGS,
            worker="box-1",
            attempt=1,
            cancelled=True,
            now=T0 + 5,
        )
    assert h.where(task.id) == ["processing"]


def test_retry_failed_or_cancelled_only(h):
    s = replace(SETTINGS, max_attempts=1)
    task = h.post(settings=s)
    with pytest.raises(NotRetryable):
        h.store.retry(HOST, QUEUE, task.id, settings=s, now=T0)
    h.claim(settings=s)
    with pytest.raises(NotRetryable):
        h.store.retry(HOST, QUEUE, task.id, settings=s, now=T0)
    h.store.fail(
        HOST, QUEUE, task.id, settings=s, worker="box-1", attempt=1, result={"e": 1}, now=T0 + 2000
    )
    back = h.store.retry(HOST, QUEUE, task.id, settings=s, now=T0 + 3000)
    assert back.status is State.PENDING and back.max_attempts == 2 and back.last_error == {"e": 1}
    assert back.result is None and back.finished_at is None and h.where(task.id) == ["pending"]
    assert h.events(task.id)[-1]["event"] == "retried"
    assert h.claim(settings=s, now=T0 + 4000).attempts == 2
    h.store.finish(
        HOST, QUEUE, task.id, settings=s, worker="box-1", attempt=2, result={}, now=T0 + 5000
    )
    with pytest.raises(NotRetryable):
        h.store.retry(HOST, QUEUE, task.id, settings=s, now=T0 + 6000)


def test_fetch_stamps_first_read_of_terminal_once_and_read_never(h):
    task = h.post()
    assert h.store.fetch(HOST, QUEUE, task.id, now=T0 + 1).fetched_at is None
    h.claim()
    h.store.finish(
        HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1, result={}, now=T0 + 2000
    )
    assert h.store.read(HOST, QUEUE, task.id).fetched_at is None
    first = h.store.fetch(HOST, QUEUE, task.id, now=T0 + 3000)
    second = h.store.fetch(HOST, QUEUE, task.id, now=T0 + 4000)
    assert first.fetched_at == second.fetched_at == T0 + 3000
    assert h.on_disk(task.id)["done"]["fetchedAt"] == T0 + 3000
    assert h.event_names(task.id).count("fetched") == 1
    view = first.status_view()
    assert "item" not in view and "lease" not in view and view["status"] == "finished"


def test_sweep_timeout_then_retention(h):
    s = replace(SETTINGS, queue_seconds=100, retain_seconds=10)
    waiting = h.post(settings=s, now=T0)
    running = h.post(settings=s, now=T0)
    h.claim(settings=s, now=T0 + 1)
    report = sweep_queue(h.store, HOST, QUEUE, s, now=T0 + 100_001)
    assert report.timeout == 2
    for task in (waiting, running):
        record = h.on_disk(task.id)["done"]
        assert record["status"] == "failed" and record["error"] == "timeout"
        assert h.events(task.id)[-1]["event"] == "timeout"
    assert sweep_queue(h.store, HOST, QUEUE, s, now=T0 + 110_000).cleaned == 0
    assert sweep_queue(h.store, HOST, QUEUE, s, now=T0 + 110_001).cleaned == 2
    assert h.where(waiting.id) == [] and h.events(waiting.id)[-1]["event"] == "cleaned"
    with pytest.raises(NotFound):
        h.store.read(HOST, QUEUE, waiting.id)


def test_lapsed_lease_past_budget_fails_with_attempts(h):
    s = replace(SETTINGS, max_attempts=1)
    task = h.post(settings=s)
    h.claim(settings=s, now=T0)
    assert sweep_queue(h.store, HOST, QUEUE, s, now=T0 + 61_000).failed == 1
    assert h.on_disk(task.id)["done"]["error"] == "attempts"


@pytest.mark.parametrize("bad", ["..", "a/b", "UPPER", "%2F", "a\x00b", "x" * 300, "é.com", ""])
def test_bad_names_touch_nothing(h, bad):
    before = h.stored()
    with pytest.raises(StoreError) as err:
        h.store.post(bad, QUEUE, {}, settings=SETTINGS, posted_by=None, now=T0)
    assert isinstance(err.value, InvalidName) and err.value.code == "not_found"
    with pytest.raises(InvalidName):
        h.store.post(HOST, bad, {}, settings=SETTINGS, posted_by=None, now=T0)
    with pytest.raises(NotFound):
        h.store.read(HOST, QUEUE, bad)
    assert h.stored() == before


def test_bad_items_and_sizes(h):
    for item in ([], "s", None, 1):
        with pytest.raises(InvalidItem):
            h.store.post(HOST, QUEUE, item, settings=SETTINGS, posted_by=None, now=T0)
    small = replace(SETTINGS, max_item_bytes=10)
    with pytest.raises(PayloadTooLarge) as err:
        h.post({"k": "x" * 20}, settings=small)
    assert err.value.which == "item" and err.value.size == 28 and "10" in err.value.detail
    schema = replace(
        SETTINGS,
        item_schema={
            "type": "object",
            "required": ["url"],
            "properties": {"url": {"type": "string"}},
        },
    )
    with pytest.raises(InvalidItem, match="url"):
        h.post({"url": 5}, settings=schema)
    assert h.post({"url": "u"}, settings=schema).item == {"url": "u"}
    task = h.post(now=T0 - 1)  # the oldest, so the claim takes this one (a tie is either)
    assert h.claim().id == task.id
    with pytest.raises(PayloadTooLarge) as err:
        h.store.finish(
            HOST,
            QUEUE,
            task.id,
            settings=small,
            worker="box-1",
            attempt=1,
            result={"k": "x" * 20},
            now=T0 + 5,
        )
    assert err.value.which == "result" and h.where(task.id) == ["processing"]
    for bad in ({"priority": 101}, {"delay_seconds": -1}, {"idempotency_key": ""}):
        with pytest.raises(InvalidRequest):
            h.post(**bad)


def test_queue_full(h):
    s = replace(SETTINGS, max_pending=2)
    h.post(settings=s)
    h.post(settings=s)
    with pytest.raises(QueueFull) as err:
        h.post(settings=s)
    assert err.value.retry_after > 0 and err.value.code == "queue_full"
    h.claim(settings=s)
    h.post(settings=s)


def test_idempotency_key(h):
    first = h.post({"a": 1}, idempotency_key="k1")
    again = h.store.post(
        HOST,
        QUEUE,
        {"a": 1},
        settings=SETTINGS,
        posted_by="alice",
        idempotency_key="k1",
        now=T0 + 5,
    )
    assert again.replayed and again.task.id == first.id
    with pytest.raises(IdempotencyKeyReused):
        h.post({"a": 2}, idempotency_key="k1")
    other_user = h.post({"a": 1}, idempotency_key="k1", posted_by="bob", now=T0 + 1)
    assert other_user.id != first.id
    assert h.count("pending") == 2
    assert h.keys() == 2
    assert h.event_names(first.id) == ["posted"]
    # cleaned with its task, after which the key is free again
    assert h.claim().id == first.id  # the older of the two
    h.store.finish(
        HOST, QUEUE, first.id, settings=SETTINGS, worker="box-1", attempt=1, result={}, now=T0 + 10
    )
    sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 10 + 3_600_000)
    assert h.keys() == 1
    assert h.post({"a": 1}, idempotency_key="k1").id != first.id


def test_list_newest_first_with_filters(h):
    a = h.post(now=T0, posted_by="alice")
    b = h.post(now=T0 + 1, posted_by="bob")
    c = h.post(now=T0 + 2, posted_by=None)
    h.claim(now=T0 + 3)  # claims a
    page = h.store.list_tasks(HOST, QUEUE)
    assert page.count == 3 and [t.id for t in page.tasks] == [c.id, b.id, a.id]
    assert [t.id for t in h.store.list_tasks(HOST, QUEUE, status="processing").tasks] == [a.id]
    assert [t.id for t in h.store.list_tasks(HOST, QUEUE, posted_by=None).tasks] == [c.id]
    assert [t.id for t in h.store.list_tasks(HOST, QUEUE, posted_by="bob").tasks] == [b.id]
    paged = h.store.list_tasks(HOST, QUEUE, posted_by=ANY, limit=1, offset=1)
    assert paged.count == 3 and [t.id for t in paged.tasks] == [b.id]


def test_stats_and_queues(h):
    h.post(now=T0)
    h.post(now=T0 + 1000, delay_seconds=100)
    h.post(now=T0 + 2000)
    h.claim(now=T0 + 3000)
    stats = h.store.stats(HOST, QUEUE, now=T0 + 10_000)
    assert (stats.pending, stats.processing, stats.done, stats.delayed) == (2, 1, 0, 1)
    assert stats.oldest_pending_ms == 9000
    assert h.store.queues() == [(HOST, QUEUE)]
    with pytest.raises(NotFound):
        h.store.stats(HOST, "nope", now=T0)


@pytest.mark.files_only("a symlink among the task files: the PostgreSQL store has no files")
def test_symlinked_task_file_is_not_followed(h, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"not": "a task"}')
    task_id = "0123456789abcdef"
    h.post()  # makes the queue
    (h.queue_dir / "pending" / f"{task_id}.json").symlink_to(secret)
    with pytest.raises(NotFound):
        h.store.read(HOST, QUEUE, task_id)
    assert h.claim().id != task_id
    assert h.claim() is None


def test_archive_payloads(h):
    s = replace(SETTINGS, archive_payloads=True)
    task = h.post({"url": "u"}, settings=s)
    h.claim(settings=s)
    h.store.progress(
        HOST, QUEUE, task.id, settings=s, worker="box-1", attempt=1, progress={"p": 1}, now=T0 + 2
    )
    h.store.finish(
        HOST, QUEUE, task.id, settings=s, worker="box-1", attempt=1, result={"r": 2}, now=T0 + 3
    )
    assert h.archive(task.id) == {
        "item.json": b'{"url":"u"}',
        "progress.jsonl": b'{"p":1}\n',
        "1-result.result.json": b'{"r":2}',
        "result.json": b'{"r":2}',  # the seed's file: the latest result
    }
    assert [e["archived"] for e in h.events(task.id)] == [["item"], [], ["progress"], ["result"]]


def test_queue_settings_clamps_and_backoff():
    assert QueueSettings(max_attempts=20).attempt_budget() == 8
    s = QueueSettings(backoff_seconds=5, backoff_factor=4, backoff_cap_seconds=300)
    assert [s.backoff_ms(n) for n in (1, 2, 3, 4, 40)] == [5000, 20000, 80000, 300000, 300000]
