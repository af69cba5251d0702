"""Dependencies (`after`) on both stores: a waiting task is kept out of claims until what it
waits for has finished, a failed one fails or cancels it, and the sweep releases what a crash
between an ending and its release left waiting."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import multiprocessing as mp
import os
import threading
import time

import pytest

from queues.store import (
    DependencyFailed,
    InvalidRequest,
    NotFound,
    PostEntry,
    QueueSettings,
    State,
)
from queues.store.dependencies import RELEASE_STEP

from . import procs
from .conftest import HOST, QUEUE, T0

LONG = procs.LONG
W = {"settings": LONG, "worker": "box-1", "attempt": 1}


def _finish(h, task_id, now):
    claimed = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=now)
    assert [t.id for t in claimed] == [task_id]
    h.store.finish(HOST, QUEUE, task_id, result={"ok": 1}, now=now + 1, **W)


def _read(h, task_id, queue=QUEUE):
    return h.store.read(HOST, queue, task_id)


def test_a_waiting_task_is_claimed_only_once_its_dependency_finished(h):
    a = h.post({"n": "a"}, settings=LONG)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id])
    assert b.after == [f"{QUEUE}/{a.id}"] and b.waiting_for == [f"{QUEUE}/{a.id}"]
    view = _read(h, b.id).status_view()
    assert view["status"] == "pending" and view["waitingFor"] == [f"{QUEUE}/{a.id}"]
    claimed = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 10, max_tasks=5)
    assert [t.id for t in claimed] == [a.id]  # b waits
    h.store.finish(HOST, QUEUE, a.id, result={"ok": 1}, now=T0 + 20, **W)
    released = _read(h, b.id)
    assert released.waiting_for is None and released.released_at == T0 + 20
    assert released.after == [f"{QUEUE}/{a.id}"]
    assert "released" in h.event_names(b.id)
    assert [t.id for t in h.store.claim(HOST, QUEUE, settings=LONG, worker="w", now=T0 + 30)] == [
        b.id
    ]


def test_a_task_waits_for_every_dependency_of_any_queue_of_its_host(h):
    a = h.post({"n": "a"}, settings=LONG)
    other = h.store.post(HOST, "thumbs", {"n": "o"}, settings=LONG, posted_by="alice", now=T0)
    c = h.post({"n": "c"}, settings=LONG, after=[a.id, f"thumbs/{other.task.id}"])
    _finish(h, a.id, T0 + 10)
    assert _read(h, c.id).waiting_for == [f"thumbs/{other.task.id}"]
    assert h.store.claim(HOST, QUEUE, settings=LONG, worker="w", now=T0 + 20) == []
    [o] = h.store.claim(HOST, "thumbs", settings=LONG, worker="box-1", now=T0 + 30)
    h.store.finish(HOST, "thumbs", o.id, result={}, now=T0 + 40, **W)
    assert _read(h, c.id).waiting_for is None
    assert [t.id for t in h.store.claim(HOST, QUEUE, settings=LONG, worker="w", now=T0 + 50)] == [
        c.id
    ]


def test_an_unknown_dependency_is_refused_as_a_read_would_be_and_nothing_is_posted(h):
    a = h.post({"n": "a"}, settings=LONG)
    for after in (["0123456789abcdef"], [a.id, "nosuchqueue/0123456789abcdef"]):
        with pytest.raises(NotFound):
            h.post({"n": "b"}, settings=LONG, after=after)
    for after in (["not-an-id"], [7], "abc", ["Bad Queue/0123456789abcdef"]):
        with pytest.raises(InvalidRequest):
            h.post({"n": "b"}, settings=LONG, after=after)
    with pytest.raises(InvalidRequest):
        h.post({"n": "b"}, settings=LONG, after=[a.id], on_dependency_failure="ignore")
    assert h.count("pending") == 1


def test_a_dependency_that_already_finished_or_failed_settles_the_post_at_once(h):
    a = h.post({"n": "a"}, settings=LONG)
    _finish(h, a.id, T0 + 10)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id], now=T0 + 20)
    assert b.waiting_for is None
    x = h.post({"n": "x"}, settings=LONG, now=T0 + 30)
    h.store.cancel(HOST, QUEUE, x.id, settings=LONG, now=T0 + 40)
    y = h.post({"n": "y"}, settings=LONG, after=[x.id], now=T0 + 50)
    ended = _read(h, y.id)
    assert ended.status.value == "failed" and ended.error == "dependency_failed"
    assert ended.failed_dependency == f"{QUEUE}/{x.id}"


@pytest.mark.parametrize("how", ["fail", "cancel", "timeout"])
def test_a_failure_half_way_ends_every_task_after_it(h, how):
    chain = [h.post({"n": 0}, settings=LONG)]
    for n in range(1, 6):
        chain.append(h.post({"n": n}, settings=LONG, after=[chain[-1].id], now=T0 + n))
    # the last one is cancelled rather than failed, as its post asked
    last = h.post({"n": 6}, settings=LONG, after=[chain[-1].id], on_dependency_failure="cancel")
    _finish(h, chain[0].id, T0 + 100)
    _finish(h, chain[1].id, T0 + 200)
    broken = chain[2]
    [t] = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 300)
    assert t.id == broken.id
    if how == "fail":
        h.store.fail(HOST, QUEUE, broken.id, result={"e": 1}, now=T0 + 301, **W)
    elif how == "cancel":
        h.store.cancel(HOST, QUEUE, broken.id, settings=LONG, now=T0 + 301)
        h.store.requeue(HOST, QUEUE, broken.id, settings=LONG, now=T0 + 302)
    else:
        h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 300 + LONG.queue_seconds * 1000)
    assert _read(h, broken.id).status.value in ("failed", "cancelled")
    for task in chain[3:]:
        ended = _read(h, task.id)
        assert (ended.status.value, ended.error) == ("failed", "dependency_failed")
        assert ended.waiting_for is None
    assert _read(h, chain[3].id).failed_dependency == f"{QUEUE}/{broken.id}"
    assert _read(h, chain[4].id).failed_dependency == f"{QUEUE}/{chain[3].id}"
    assert _read(h, last.id).status.value == "cancelled"
    assert h.store.claim(HOST, QUEUE, settings=LONG, worker="w", now=T0 + 400) == []


def test_a_waiting_task_does_not_time_out_while_it_waits_and_its_window_opens_at_release(h):
    short = QueueSettings(queue_seconds=60, lease_seconds=30, retain_seconds=600)
    a = h.post({"n": "a"}, settings=short)
    b = h.post({"n": "b"}, settings=short, after=[a.id])
    h.store.claim(HOST, QUEUE, settings=short, worker="box-1", now=T0 + 1)
    h.store.progress(HOST, QUEUE, a.id, settings=short, worker="box-1", attempt=1,
                     lease_seconds=30, now=T0 + 50_000)  # fmt: skip
    h.store.finish(HOST, QUEUE, a.id, settings=short, worker="box-1", attempt=1, result={},
                   now=T0 + 55_000)  # fmt: skip
    h.store.sweep_queue(HOST, QUEUE, short, now=T0 + 90_000)  # past b's post's window
    assert _read(h, b.id).status.value == "pending"
    h.store.sweep_queue(HOST, QUEUE, short, now=T0 + 55_000 + 60_001)
    assert _read(h, b.id).error == "timeout"


def _claimed_ids(h, now, queue=QUEUE):
    got = h.store.claim(HOST, queue, settings=LONG, worker="box-1", now=now, max_tasks=10)
    return {t.id for t in got}


def test_a_cancelled_waiting_task_retried_waits_for_its_dependency_again(h):
    a = h.post({"n": "a"}, settings=LONG)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id])
    h.store.cancel(HOST, QUEUE, b.id, settings=LONG, now=T0 + 10)
    retried = h.store.retry(HOST, QUEUE, b.id, settings=LONG, now=T0 + 20)
    assert retried.status is State.PENDING and retried.waiting_for == [f"{QUEUE}/{a.id}"]
    assert _read(h, b.id).waiting_for == [f"{QUEUE}/{a.id}"]
    assert _claimed_ids(h, T0 + 30) == {a.id}  # b waits for a, as its post asked
    h.store.finish(HOST, QUEUE, a.id, result={}, now=T0 + 40, **W)
    assert _read(h, b.id).released_at == T0 + 40
    assert _claimed_ids(h, T0 + 50) == {b.id}


def test_a_dependency_failed_task_is_retried_after_its_dependency_and_runs_after_it(h):
    a = h.post({"n": "a"}, settings=LONG)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id])
    c = h.post({"n": "c"}, settings=LONG, after=[b.id], on_dependency_failure="cancel")
    assert _claimed_ids(h, T0 + 1) == {a.id}
    h.store.fail(HOST, QUEUE, a.id, result={"e": 1}, now=T0 + 2, **W)
    assert _read(h, b.id).error == "dependency_failed"
    assert _read(h, c.id).status is State.CANCELLED
    for early, after_it in ((b, a), (c, b)):  # refused while what it runs after has not finished
        before = _read(h, early.id)
        with pytest.raises(DependencyFailed) as refused:
            h.store.retry(HOST, QUEUE, early.id, settings=LONG, now=T0 + 3)
        assert refused.value.code == "dependency_failed"
        assert refused.value.dependency == f"{QUEUE}/{after_it.id}"
        assert f"{QUEUE}/{after_it.id}" in refused.value.detail
        assert _read(h, early.id) == before  # nothing changed
    for n, task in enumerate((a, b, c)):  # the chain retried in order: each waits again
        h.store.retry(HOST, QUEUE, task.id, settings=LONG, now=T0 + 10 + n)
    assert _read(h, b.id).waiting_for == [f"{QUEUE}/{a.id}"]
    assert _read(h, c.id).waiting_for == [f"{QUEUE}/{b.id}"]
    for n, task in enumerate((a, b, c)):
        assert _claimed_ids(h, T0 + 100 + 10 * n) == {task.id}
        h.store.finish(HOST, QUEUE, task.id, result={}, now=T0 + 105 + 10 * n,
                       settings=LONG, worker="box-1", attempt=2 if task is a else 1)  # fmt: skip
    assert [_read(h, t.id).status for t in (a, b, c)] == [State.FINISHED] * 3


def test_a_retried_dependent_waits_for_a_dependency_retried_and_still_running(h):
    a = h.post({"n": "a"}, settings=LONG)
    other = h.store.post(HOST, "thumbs", {"n": "o"}, settings=LONG, posted_by="alice", now=T0)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id, f"thumbs/{other.task.id}"])
    h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 1)
    h.store.fail(HOST, QUEUE, a.id, result={"e": 1}, now=T0 + 2, **W)
    h.store.retry(HOST, QUEUE, a.id, settings=LONG, now=T0 + 3)
    h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 4)  # a runs again
    h.store.retry(HOST, QUEUE, b.id, settings=LONG, now=T0 + 5)
    assert _read(h, b.id).waiting_for == [f"{QUEUE}/{a.id}", f"thumbs/{other.task.id}"]
    h.store.finish(HOST, QUEUE, a.id, result={}, now=T0 + 6, settings=LONG, worker="box-1",
                   attempt=2)  # fmt: skip
    assert _read(h, b.id).waiting_for == [f"thumbs/{other.task.id}"]
    assert _claimed_ids(h, T0 + 7) == set()
    # the other one fails: b fails again for it, as it would have the first time
    h.store.claim(HOST, "thumbs", settings=LONG, worker="box-1", now=T0 + 8)
    h.store.fail(HOST, "thumbs", other.task.id, result={}, now=T0 + 9, **W)
    ended = _read(h, b.id)
    assert ended.error == "dependency_failed"
    assert ended.failed_dependency == f"thumbs/{other.task.id}"


def test_a_task_that_ran_is_retried_at_once_even_when_its_dependency_is_gone(h):
    a = h.post({"n": "a"}, settings=LONG)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id])
    _finish(h, a.id, T0 + 10)
    assert _claimed_ids(h, T0 + 20) == {b.id}
    h.store.fail(HOST, QUEUE, b.id, result={"e": 1}, now=T0 + 21, **W)
    h.store.delete(HOST, QUEUE, a.id, now=T0 + 22)  # it finished: b ran after it once
    retried = h.store.retry(HOST, QUEUE, b.id, settings=LONG, now=T0 + 30)
    assert retried.waiting_for is None
    assert _claimed_ids(h, T0 + 40) == {b.id}


def test_a_never_run_task_whose_dependency_is_gone_is_refused_a_retry(h):
    a = h.post({"n": "a"}, settings=LONG)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id])
    h.store.cancel(HOST, QUEUE, a.id, settings=LONG, now=T0 + 10)
    h.store.delete(HOST, QUEUE, a.id, now=T0 + 11)
    with pytest.raises(DependencyFailed) as refused:
        h.store.retry(HOST, QUEUE, b.id, settings=LONG, now=T0 + 20)
    assert "gone" in refused.value.detail
    assert _read(h, b.id).status is State.FAILED


@pytest.mark.files_only("the file store's disk calls are where the ending is put")
def test_an_ending_just_before_the_retry_registers_is_released_by_the_retry(h):
    """The retry registers its waiter before it writes the task and looks again after, as a
    post does: a dependency that ends after the retry read it, and before the registration,
    finds no waiter, and the retry releases the task itself."""
    from queues.store import files

    a = h.post({"n": "a"}, settings=LONG)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id])
    h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 1)
    h.store.fail(HOST, QUEUE, a.id, result={}, now=T0 + 2, **W)  # b fails, a's waiters go
    h.store.retry(HOST, QUEUE, a.id, settings=LONG, now=T0 + 2)
    h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 2)
    ended = []

    def end_a_first(_call: int, kind: str) -> None:
        # the retry's first disk call is its registration with a: a ends just before it
        if not ended and kind == "open":
            ended.append(True)
            h.store.finish(HOST, QUEUE, a.id, result={}, now=T0 + 3, settings=LONG,
                           worker="box-1", attempt=2)  # fmt: skip

    files.FAULTS.reset()
    files.FAULTS.before = end_a_first
    try:
        retried = h.store.retry(HOST, QUEUE, b.id, settings=LONG, now=T0 + 4)
    finally:
        files.FAULTS.reset()
    assert ended and retried.waiting_for is None  # released by its own retry
    assert "released" in h.event_names(b.id)
    assert _claimed_ids(h, T0 + 5) == {b.id}


def test_a_batch_entry_may_wait_for_a_task_and_is_refused_by_index(h):
    from queues.store.batch import PostEntry

    a = h.post({"n": "a"}, settings=LONG)
    results = h.store.post_many(
        HOST, QUEUE, [PostEntry(item={"n": 1}), PostEntry(item={"n": 2}, after=(a.id,))],
        settings=LONG, posted_by="alice", now=T0 + 1,
    )  # fmt: skip
    assert results[0].task.waiting_for is None
    assert results[1].task.waiting_for == [f"{QUEUE}/{a.id}"]
    with pytest.raises(NotFound) as refused:
        h.store.post_many(
            HOST, QUEUE,
            [PostEntry(item={"n": 3}), PostEntry(item={"n": 4}, after=("0123456789abcdef",))],
            settings=LONG, posted_by="alice", now=T0 + 2,
        )  # fmt: skip
    assert refused.value.index == 1
    assert h.count("pending") == 3


def test_a_chain_runs_in_order_with_four_worker_processes(h, n=120):
    chain = [h.post({"n": 0}, settings=LONG, now=int(time.time() * 1000))]
    for i in range(1, n):
        chain.append(h.post({"n": i}, settings=LONG, after=[chain[-1].id]))
    ctx = mp.get_context("spawn")
    out, start = ctx.Queue(), ctx.Barrier(4)
    workers = [
        ctx.Process(target=procs.chain_worker, args=(h.opener(), f"w{i}", None, out, start))
        for i in range(4)
    ]
    for p in workers:
        p.start()
    results = [out.get(timeout=240) for _ in workers]
    for p in workers:
        p.join(30)
    assert all(not errors for _, _, errors in results), results
    assert sorted(r[0] for _, done, _ in results for r in done) == sorted(t.id for t in chain)
    # the event log, in the order its lines were written by every process: each task claimed
    # once, after the one before it had its result
    lines = [(e["id"], e["event"]) for e in h.events() if e["event"] in ("claimed", "result")]
    at = {line: n for n, line in enumerate(lines)}
    assert len(lines) == 2 * n
    for before, after in itertools.pairwise(chain):
        assert at[(after.id, "claimed")] > at[(before.id, "result")]
    assert len({w for w, done, _ in results if done}) > 1  # more than one worker took part


def test_a_failure_half_way_with_worker_processes_ends_the_rest(h):
    chain = [h.post({"n": 0}, settings=LONG, now=int(time.time() * 1000))]
    for i in range(1, 40):
        chain.append(h.post({"n": i}, settings=LONG, after=[chain[-1].id]))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    workers = [
        ctx.Process(target=procs.chain_worker, args=(h.opener(), f"w{i}", chain[20].id, out))
        for i in range(4)
    ]
    for p in workers:
        p.start()
    results = [out.get(timeout=240) for _ in workers]
    for p in workers:
        p.join(30)
    assert all(not errors for _, _, errors in results), results
    ran = {r[0] for _, done, _ in results for r in done}
    assert ran == {t.id for t in chain[:21]}
    for task in chain[21:]:
        assert _read(h, task.id).error == "dependency_failed"


@pytest.mark.files_only("the file store's disk calls are where the crash is put")
def test_a_crash_at_every_step_between_an_ending_and_its_release_the_sweep_releases(tmp_path):
    from .conftest import Harness

    ctx = mp.get_context("fork")
    released_by_sweep = 0
    for k in range(1, 40):
        h = Harness(tmp_path / f"k{k}")
        now = int(time.time() * 1000)
        a = h.post({"n": "a"}, settings=LONG, now=now)
        b = h.post({"n": "b"}, settings=LONG, after=[a.id], now=now)
        h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=now)
        child = ctx.Process(target=procs.finish_and_crash, args=(h.config, a.id, k))
        child.start()
        child.join(30)
        assert child.exitcode in (0, 137)
        h.reopen()
        finished = h.store.read(HOST, QUEUE, a.id).status.value == "finished"
        waiting_after_crash = _read(h, b.id).waiting_for is not None
        h.store.sweep_queue(HOST, QUEUE, LONG, now=now + 1000)
        b_now = _read(h, b.id)
        # released exactly when what it waited for finished, whichever step the crash hit
        assert (b_now.waiting_for is None) == finished, k
        if finished and waiting_after_crash:
            released_by_sweep += 1
            assert h.event_names(b.id).count("released") == 1
        if finished:
            assert not list((h.queue_dir / "dependents").iterdir())  # nothing left to release
        h.close()
        if child.exitcode == 0:
            break
    else:
        pytest.fail("the finish never completed")
    assert released_by_sweep >= 1  # some crash fell between the ending and the release


def test_posts_racing_the_end_of_what_they_wait_for_are_all_released(h):
    now = int(time.time() * 1000)
    a = h.post({"n": "a"}, settings=LONG, now=now)
    h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=now)
    ctx = mp.get_context("spawn")
    out, start = ctx.Queue(), ctx.Event()
    posters = [
        ctx.Process(target=procs.after_poster, args=(h.opener(), a.id, 40, start, out))
        for _ in range(4)
    ]
    for p in posters:
        p.start()
    start.set()
    first = out.get(timeout=120)  # one poster is done: the others may still be posting
    h.store.finish(HOST, QUEUE, a.id, result={}, **W)
    results = [first] + [out.get(timeout=120) for _ in posters[1:]]
    for p in posters:
        p.join(30)
    assert h.store.wait_releases(60)  # past its first hundred, the ending's background
    assert all(not errors for _, errors in results), results
    ids = [i for posted, _ in results for i in posted]
    assert len(ids) == 160
    # every one released, by the ending or by its own post: none waits for a finished task
    assert [i for i in ids if _read(h, i).waiting_for is not None] == []
    claimed = h.store.claim(HOST, QUEUE, settings=LONG, worker="w", max_tasks=100)
    claimed += h.store.claim(HOST, QUEUE, settings=LONG, worker="w", max_tasks=100)
    assert sorted(t.id for t in claimed) == sorted(ids)


@pytest.mark.files_only("the file store's disk calls are where the ending is put")
def test_an_ending_just_before_the_post_registers_is_released_by_the_post(h):
    from queues.store import files

    a = h.post({"n": "a"}, settings=LONG)
    h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 1)
    ended = []

    def end_a_first(_call: int, kind: str) -> None:
        # the post's first disk call is its registration with a: a ends just before it,
        # so its release finds no waiter, as an ending in another process could
        if not ended and kind == "open":
            ended.append(True)
            h.store.finish(HOST, QUEUE, a.id, result={}, now=T0 + 2, **W)

    files.FAULTS.reset()
    files.FAULTS.before = end_a_first
    try:
        b = h.post({"n": "b"}, settings=LONG, after=[a.id], now=T0 + 3)
    finally:
        files.FAULTS.reset()
    assert ended and b.waiting_for == [f"{QUEUE}/{a.id}"]  # it was posted waiting
    assert _read(h, b.id).waiting_for is None  # and released by its own post


@pytest.mark.slow
def test_a_chain_of_a_thousand_runs_in_order_with_four_worker_processes(h):
    test_a_chain_runs_in_order_with_four_worker_processes(h, n=1000)


def test_the_sweep_releases_what_an_ending_left_waiting(h, store_kind):
    """An ending whose release did not happen (on files, a crash after the ending's record;
    on PostgreSQL, a task ended by a write that released nothing): the sweep does it."""
    a = h.post({"n": "a"}, settings=LONG)
    b = h.post({"n": "b"}, settings=LONG, after=[a.id])
    c = h.post({"n": "c"}, settings=LONG, after=[b.id])
    [claimed] = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 1)
    failed = claimed.replace(status=State.FAILED, lease=None, updated_at=T0 + 2, finished_at=T0 + 2)
    if store_kind == "postgres":
        from queues.store.rules import Change
        from queues.store_pg.rows import DIRECTORY

        change = Change(DIRECTORY[claimed.status], claimed, failed, "failed")
        with h.store._pool.connection() as conn, conn.transaction():
            h.store._writer.apply(conn, [change], now=T0 + 2, worker=None, settings=LONG,
                                  release=False)  # fmt: skip
    else:
        with h.store.queue_dirs(HOST, QUEUE) as qd:  # the record alone, as a crash leaves it
            from queues.store import copies

            copies.commit(qd, "processing", failed, fsync=False)
    assert _read(h, b.id).waiting_for == [f"{QUEUE}/{a.id}"]
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 3)
    assert (_read(h, b.id).error, _read(h, c.id).error) == ("dependency_failed",) * 2
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 4)  # a second sweep finds nothing to do
    assert h.event_names(b.id).count("failed") == 1


def _awaited_by(h, n):
    """A claimed task that `n` tasks wait for (posted in batches, in order), and their ids."""
    a = h.post({"n": "a"}, settings=LONG)
    ids = []
    for start in range(0, n, 100):
        entries = [
            PostEntry(item={"i": i}, after=(a.id,)) for i in range(start, min(n, start + 100))
        ]
        posted = h.store.post_many(HOST, QUEUE, entries, settings=LONG, posted_by="alice", now=T0)
        ids += [r.task.id for r in posted]
    [claimed] = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 1)
    assert claimed.id == a.id
    return a, ids


def _released_first(store_kind, ids):
    """The waiters an ending releases first: its dependents file's order on files (the order
    they were posted in), the rows' order on PostgreSQL."""
    return ids[:RELEASE_STEP] if store_kind == "files" else sorted(ids)[:RELEASE_STEP]


@contextlib.contextmanager
def _held(h, store_kind, ids):
    """The tasks' locks held for the block, as a writer in another process holds them: the
    task file's flock, the row's FOR UPDATE."""
    if store_kind == "postgres":
        import psycopg
        from psycopg import sql

        with psycopg.connect(h.config.dsn) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(h.config.schema)))
            conn.execute("SELECT 1 FROM th_tasks WHERE id = ANY(%s) FOR UPDATE", (ids,))
            yield
            conn.rollback()
        return
    fds = [os.open(h.queue_dir / "pending" / f"{i}.json", os.O_RDONLY) for i in ids]
    try:
        for fd in fds:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)


def test_an_ending_changes_at_most_a_step_of_its_waiters_and_its_background_the_rest(h, store_kind):
    a, ids = _awaited_by(h, RELEASE_STEP + 150)
    first = _released_first(store_kind, ids)
    rest = [i for i in ids if i not in set(first)]
    answered = threading.Event()

    def end():
        h.store.fail(HOST, QUEUE, a.id, result={"no": 1}, now=T0 + 2, **W)
        answered.set()

    ending = threading.Thread(target=end, daemon=True)
    with _held(h, store_kind, rest):  # none of these can change until the block ends
        ending.start()
        # the answer waits for its first step only (without the fix it waits for the held)
        assert answered.wait(60)
        assert {i for i in ids if _read(h, i).status is State.FAILED} == set(first)
        assert {_read(h, i).waiting_for is not None for i in rest} == {True}
    ending.join(60)
    assert h.store.wait_releases(60)  # the background had the rest as soon as it could
    assert {_read(h, i).error for i in ids} == {"dependency_failed"}
    assert {h.event_names(i).count("failed") for i in ids} == {1}


def test_what_the_background_did_not_release_before_its_process_died_the_sweep_does(h, store_kind):
    a, ids = _awaited_by(h, RELEASE_STEP + 50)
    rest = [i for i in ids if i not in set(_released_first(store_kind, ids))]
    ctx = mp.get_context("spawn")
    answered = ctx.Event()
    child = ctx.Process(target=procs.fail_and_wait, args=(h.opener(), a.id, answered))
    with _held(h, store_kind, rest):  # its background is stuck on these when it is killed
        child.start()
        assert answered.wait(120)
        child.kill()
        child.join(30)
    assert {_read(h, i).waiting_for is not None for i in rest} == {True}
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 3)
    assert {_read(h, i).error for i in ids} == {"dependency_failed"}
    assert {h.event_names(i).count("failed") for i in ids} == {1}
