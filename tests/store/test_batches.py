"""Batch post and batch finish in the store: checked whole before anything is written (post),
answered entry by entry (finish), and sharing their fsyncs (group commit within one call)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from queues.store import (
    MAX_BATCH,
    IdempotencyKeyReused,
    InvalidItem,
    InvalidRequest,
    LeaseLost,
    NotFound,
    PayloadTooLarge,
    PostEntry,
    QueueFull,
    Report,
    Reported,
    State,
    files,
    sweep_queue,
)

from .conftest import HOST, QUEUE, SETTINGS, T0, Harness

SMALL = replace(SETTINGS, max_item_bytes=64, lease_seconds=60)


def entries(n: int, **kw) -> list[PostEntry]:
    return [PostEntry(item={"n": i}, **kw) for i in range(n)]


def post_many(h, batch, *, settings=SETTINGS, now=T0, posted_by="alice"):
    return h.store.post_many(HOST, QUEUE, batch, settings=settings, posted_by=posted_by, now=now)


def nothing_written(h) -> bool:
    tasks = sum(h.count(d) for d in ("pending", "processing", "done"))
    return tasks == 0 and h.keys() == 0 and h.events() == [] and not h.temp_files()


def test_a_batch_post_writes_every_task_in_order_with_its_own_options(h):
    batch = [
        PostEntry(item={"a": 1}),
        PostEntry(item={"b": 2}, priority=7),
        PostEntry(item={"c": 3}, delay_seconds=30),
        PostEntry(item={"d": 4}, idempotency_key="k-4"),
    ]
    posted = post_many(h, batch)
    assert [p.task.item for p in posted] == [{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]
    assert not any(p.replayed for p in posted)
    assert posted[1].task.priority == 7
    assert posted[2].task.available_at == T0 + 30_000
    for p in posted:
        assert h.where(p.task.id) == ["pending"]
        assert h.event_names(p.task.id) == ["posted"]
        assert h.on_disk(p.task.id)["pending"] == p.task.to_record()
    # the lines come in the order of the entries
    assert [e["id"] for e in h.events()] == [p.task.id for p in posted]
    assert h.keys() == 1


def test_a_batch_of_the_most_entries_is_taken_and_one_more_is_refused(h):
    assert len(post_many(h, entries(MAX_BATCH))) == MAX_BATCH
    with pytest.raises(InvalidRequest, match="1 to 100"):
        post_many(h, entries(MAX_BATCH + 1))
    assert len(h.events()) == MAX_BATCH


def test_an_empty_batch_is_refused(h):
    with pytest.raises(InvalidRequest, match=r"got 0"):
        post_many(h, [])
    assert nothing_written(h)


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (PostEntry(item=[1, 2]), InvalidItem),
        (PostEntry(item={"x": "y" * 100}), PayloadTooLarge),
        (PostEntry(item={}, priority=101), InvalidRequest),
        (PostEntry(item={}, delay_seconds=-1), InvalidRequest),
        (PostEntry(item={}, idempotency_key="has space"), InvalidRequest),
    ],
)
def test_one_bad_entry_refuses_the_batch_naming_its_index_and_nothing_is_written(h, bad, error):
    batch = entries(5)
    batch[3] = bad
    with pytest.raises(error) as refused:
        post_many(h, batch, settings=SMALL)
    assert refused.value.index == 3
    assert nothing_written(h)


def test_two_entries_with_one_key_refuse_the_batch_naming_the_second(h):
    batch = entries(4)
    batch[1] = PostEntry(item={"a": 1}, idempotency_key="same")
    batch[2] = PostEntry(item={"a": 1}, idempotency_key="same")
    with pytest.raises(InvalidRequest, match="same Idempotency-Key") as refused:
        post_many(h, batch)
    assert refused.value.index == 2
    assert nothing_written(h)


def test_a_key_used_before_replays_its_task_and_the_other_entries_are_new(h):
    first = h.post({"a": 1}, idempotency_key="k1")
    posted = post_many(
        h, [PostEntry(item={"b": 1}), PostEntry(item={"a": 1}, idempotency_key="k1")]
    )
    assert [p.replayed for p in posted] == [False, True]
    assert posted[1].task.id == first.id
    assert h.event_names(first.id) == ["posted"]  # the replay wrote nothing
    assert h.where(posted[0].task.id) == ["pending"]


def test_a_key_used_with_another_item_refuses_the_batch_before_anything_is_written(h):
    first = h.post({"a": 1}, idempotency_key="k1")
    batch = [
        PostEntry(item={"new": 1}, idempotency_key="k0"),
        PostEntry(item={"a": 2}, idempotency_key="k1"),
    ]
    with pytest.raises(IdempotencyKeyReused) as refused:
        post_many(h, batch)
    assert refused.value.index == 1
    assert [e["id"] for e in h.events()] == [first.id]
    assert h.keys() == 1  # k0's key was not left behind


def test_a_batch_that_would_pass_max_pending_is_refused_whole(h):
    capped = replace(SETTINGS, max_pending=5)
    post_many(h, entries(3), settings=capped)
    with pytest.raises(QueueFull):
        post_many(h, entries(3), settings=capped)
    assert len(h.events()) == 3
    assert len(post_many(h, entries(2), settings=capped)) == 2


def test_a_batch_post_shares_one_fsync_of_pending_and_one_of_the_log(tmp_path):
    h = Harness(tmp_path, fsync=True)
    try:
        h.store.create_queue(HOST, QUEUE)
        files.FAULTS.reset()
        files.FAULTS.record = True
        post_many(h, entries(10))
        kinds = files.FAULTS.kinds
        files.FAULTS.reset()
        assert kinds.count("fsync_dir") == 1  # pending/, once for the ten
        assert kinds.count("rename") == 10
        assert kinds.count("append") == 1  # ten lines, one write and one flush
        assert kinds.count("fsync") == 11  # each data file, and the log once
        assert kinds.index("fsync_dir") > max(i for i, k in enumerate(kinds) if k == "rename")
        assert kinds.index("append") > kinds.index("fsync_dir")
    finally:
        files.FAULTS.reset()
        h.close()


# -- batch finish -------------------------------------------------------------------------------

WORKER = "box-1"


def claimed(h, n: int, *, settings=SETTINGS) -> list:
    post_many(h, entries(n), settings=settings)
    return h.store.claim(HOST, QUEUE, settings=settings, worker=WORKER, max_tasks=n, now=T0 + 1000)


def finish_many(h, reports, *, settings=SETTINGS, now=T0 + 2000, worker=WORKER):
    return h.store.finish_many(HOST, QUEUE, reports, settings=settings, worker=worker, now=now)


def test_a_batch_finish_ends_each_task_as_reported_and_answers_in_order(h):
    tasks = claimed(h, 3)
    answers = finish_many(
        h,
        [
            Report(task_id=tasks[0].id, attempt=1, outcome="result", result={"ok": 0}),
            Report(task_id=tasks[1].id, attempt=1, outcome="fail", result={"e": 1}),
            Report(task_id=tasks[2].id, attempt=1, outcome="retry", result={"e": 2}),
        ],
    )
    assert all(isinstance(a, Reported) and not a.replayed for a in answers)
    assert [a.task.status for a in answers] == [State.FINISHED, State.FAILED, State.PENDING]
    assert [a.task.id for a in answers] == [t.id for t in tasks]
    assert h.where(tasks[0].id) == ["done"] and h.where(tasks[2].id) == ["pending"]
    assert h.on_disk(tasks[0].id)["done"]["result"] == {"ok": 0}
    assert h.on_disk(tasks[2].id)["pending"]["lastError"] == {"e": 2}
    assert [h.event_names(t.id)[-1] for t in tasks] == ["result", "failed", "requeue"]


def test_a_lapsed_lease_refuses_that_entry_alone(h):
    settings = replace(SETTINGS, lease_seconds=1)
    tasks = claimed(h, 3, settings=settings)
    sweep_queue(h.store, HOST, QUEUE, settings, now=T0 + 5000)  # every lease lapsed: requeued
    again = h.store.claim(HOST, QUEUE, settings=settings, worker=WORKER, max_tasks=2,
                          now=T0 + 6000)  # fmt: skip
    lapsed = next(t for t in tasks if t.id not in {a.id for a in again})
    reports = [Report(task_id=t.id, attempt=2, outcome="result", result={}) for t in again]
    reports.insert(1, Report(task_id=lapsed.id, attempt=1, outcome="result", result={}))
    answers = finish_many(h, reports, settings=settings, now=T0 + 6500)
    assert isinstance(answers[1], LeaseLost) and answers[1].index == 1
    assert [a.task.status for a in (answers[0], answers[2])] == [State.FINISHED, State.FINISHED]
    assert h.where(lapsed.id) == ["pending"]
    assert h.event_names(lapsed.id)[-1] == "requeue"


def test_per_entry_refusals_leave_the_other_entries_done(h):
    settings = replace(SETTINGS, max_item_bytes=64)
    tasks = claimed(h, 3, settings=settings)
    answers = finish_many(
        h,
        [
            Report(task_id=tasks[0].id, attempt=2, outcome="result", result={}),  # wrong attempt
            Report(task_id="0123456789abcdef", attempt=1, outcome="result", result={}),
            Report(task_id="not-an-id", attempt=1, outcome="result", result={}),
            Report(task_id=tasks[1].id, attempt=1, outcome="result", result={"x": "y" * 100}),
            Report(task_id=tasks[2].id, attempt=1, outcome="result", result={}),
        ],
        settings=settings,
    )
    assert [type(a) for a in answers[:4]] == [LeaseLost, NotFound, NotFound, PayloadTooLarge]
    assert [a.index for a in answers[:4]] == [0, 1, 2, 3]
    assert answers[4].task.status is State.FINISHED
    assert h.where(tasks[0].id) == ["processing"] and h.where(tasks[1].id) == ["processing"]


def test_the_same_batch_again_is_answered_as_replays(h):
    tasks = claimed(h, 2)
    reports = [Report(task_id=t.id, attempt=1, outcome="result", result={}) for t in tasks]
    finish_many(h, reports)
    again = finish_many(h, reports, now=T0 + 3000)
    assert all(a.replayed for a in again)
    assert [h.event_names(t.id) for t in tasks] == [["posted", "claimed", "result"]] * 2


def test_a_batch_finish_naming_one_task_twice_is_refused_whole(h):
    tasks = claimed(h, 2)
    reports = [
        Report(task_id=tasks[0].id, attempt=1, outcome="result", result={}),
        Report(task_id=tasks[1].id, attempt=1, outcome="result", result={}),
        Report(task_id=tasks[0].id, attempt=1, outcome="fail", result={}),
    ]
    with pytest.raises(InvalidRequest, match="twice") as refused:
        finish_many(h, reports)
    assert refused.value.index == 2
    assert [h.where(t.id) for t in tasks] == [["processing"], ["processing"]]


@pytest.mark.parametrize("n", [0, MAX_BATCH + 1])
def test_a_batch_finish_of_no_or_too_many_outcomes_is_refused(h, n):
    reports = [Report(task_id=f"{i:016x}", attempt=1, outcome="result") for i in range(n)]
    with pytest.raises(InvalidRequest, match="1 to 100"):
        finish_many(h, reports)


def test_a_batch_finish_shares_the_fsyncs_of_each_directory_and_of_the_log(tmp_path):
    h = Harness(tmp_path, fsync=True)
    try:
        tasks = claimed(h, 10)
        files.FAULTS.reset()
        files.FAULTS.record = True
        answers = finish_many(
            h, [Report(task_id=t.id, attempt=1, outcome="result", result={}) for t in tasks]
        )
        kinds = files.FAULTS.kinds
        files.FAULTS.reset()
        assert all(a.task.status is State.FINISHED for a in answers)
        assert kinds.count("fsync_dir") == 1  # done/ once; processing/ they left is not flushed
        assert kinds.count("unlink") == 10 and kinds.count("append") == 1
        first_unlink = kinds.index("unlink")
        assert kinds.index("fsync_dir") < first_unlink  # the destination before any source
        assert kinds.index("append") > max(i for i, k in enumerate(kinds) if k == "fsync_dir")
    finally:
        files.FAULTS.reset()
        h.close()


# (a failed append of the lines spools them and acknowledges the batch: tests/store/test_spool.py)
@pytest.mark.parametrize("kind", ["fsync", "rename", "fsync_dir"])
def test_a_failed_write_in_a_batch_post_acknowledges_nothing(tmp_path, kind):
    import errno

    from queues.store import StorageUnavailable

    h = Harness(tmp_path, fsync=True)
    try:
        h.store.create_queue(HOST, QUEUE)
        files.FAULTS.reset()
        nth = 2 if kind in ("fsync", "rename") else 1  # the second file's, or the one there is
        files.FAULTS.fail_kind, files.FAULTS.fail_at, files.FAULTS.fail_errno = kind, nth, errno.EIO
        try:
            with pytest.raises(StorageUnavailable):
                post_many(h, entries(5))
        finally:
            files.FAULTS.reset()
        assert h.temp_files() == []  # every temp of the batch was taken back
        if kind in ("fsync", "rename"):  # before any rename completed, or at the second one
            assert len(list((h.queue_dir / "pending").glob("*.json"))) <= 1
        assert h.events() == []  # nothing was logged, so nothing was acknowledged
        assert len(post_many(h, entries(5))) == 5  # and the next batch goes through
    finally:
        h.close()


@pytest.mark.parametrize("kind", ["fsync", "rename", "fsync_dir"])
def test_a_failed_write_in_a_batch_finish_or_claim_leaves_the_old_state(tmp_path, kind):
    import errno

    from queues.store import StorageUnavailable

    h = Harness(tmp_path, fsync=True)
    try:
        post_many(h, entries(6))
        nth = 2 if kind in ("fsync", "rename") else 1  # the second file's, or the first directory
        if kind == "rename":  # a claim flushes nothing (store.md, fourth version): no fsync fails
            files.FAULTS.fail_kind, files.FAULTS.fail_at = kind, nth
            files.FAULTS.fail_errno = errno.EIO
            try:
                with pytest.raises(StorageUnavailable):
                    h.store.claim(HOST, QUEUE, settings=SETTINGS, worker=WORKER, max_tasks=3,
                                  now=T0 + 1000)  # fmt: skip
            finally:
                files.FAULTS.reset()
            assert h.temp_files() == []
            assert [e["event"] for e in h.events()] == ["posted"] * 6  # no claim acknowledged
            # the renames back to pending/ ran: every task is claimable
            assert len(list((h.queue_dir / "pending").glob("*.json"))) == 6
        tasks = h.store.claim(HOST, QUEUE, settings=SETTINGS, worker=WORKER, max_tasks=3,
                              now=T0 + 1000)  # fmt: skip
        assert len(tasks) == 3
        files.FAULTS.fail_kind, files.FAULTS.fail_at, files.FAULTS.fail_errno = kind, nth, errno.EIO
        reports = [Report(task_id=t.id, attempt=1, outcome="result", result={}) for t in tasks]
        try:
            with pytest.raises(StorageUnavailable):
                finish_many(h, reports)
        finally:
            files.FAULTS.reset()
        assert h.temp_files() == []
        assert [e["event"] for e in h.events()].count("result") == 0
        if kind != "fsync_dir":
            assert all(h.where(t.id) == ["processing"] for t in tasks[1:])
        answers = finish_many(h, reports, now=T0 + 3000)
        assert all(a.task.status is State.FINISHED for a in answers)
    finally:
        h.close()
