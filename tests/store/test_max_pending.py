"""maxPending is exact: posts racing from many processes never take a queue past its cap.

A post used to count the pending tasks, then write: eight posters into a queue one short of full
all counted one free place and all wrote. Retries and requeues into pending are not posts and
are not capped."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from dataclasses import replace

import pytest

from queues.store import IdempotencyKeyReused, PostEntry, QueueFull

from . import procs
from .conftest import HOST, SETTINGS, T0

POSTERS, ROUNDS = 8, 4


@pytest.mark.slow
def test_eight_processes_posting_into_a_queue_one_short_of_full(h):
    queues = [f"capped{n}" for n in range(ROUNDS)]
    capped = replace(SETTINGS, max_pending=procs.CAP)
    for queue in queues:
        for n in range(procs.CAP - 1):
            h.store.post(HOST, queue, {"n": n}, settings=capped, posted_by="a", now=T0)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(POSTERS), ctx.Queue()
    args = (h.opener(fsync=True), queues, barrier, out)
    posters = [ctx.Process(target=procs.capped_poster, args=args) for _ in range(POSTERS)]
    for p in posters:
        p.start()
    outcomes = [o for _ in posters for o in out.get(timeout=120)]
    for p in posters:
        p.join(30)
        assert p.exitcode == 0
    for queue in queues:
        mine = Counter(outcome for q, outcome in outcomes if q == queue)
        assert mine == {"posted": 1, "full": POSTERS - 1}, (queue, mine)
        assert h.store.list_tasks(HOST, queue, status="pending").count == procs.CAP


def test_a_requeue_into_a_full_queue_is_not_refused(h):
    capped = replace(SETTINGS, max_pending=2)
    first = h.post(settings=capped)
    h.claim(settings=capped)
    h.post(settings=capped, now=T0 + 1)
    h.post(settings=capped, now=T0 + 2)
    with pytest.raises(QueueFull):
        h.post(settings=capped, now=T0 + 3)
    h.store.fail(HOST, "resize", first.id, settings=capped, worker="box-1", attempt=1,
                 retry=True, now=T0 + 4)  # fmt: skip
    assert h.where(first.id) == ["pending"]
    assert h.count("pending") == 3
    with pytest.raises(QueueFull):
        h.post(settings=capped, now=T0 + 5)


def test_a_replay_of_a_key_is_answered_when_the_queue_is_full(h):
    """A client that lost the answer posts again: it gets its first task, however full."""
    capped = replace(SETTINGS, max_pending=2)
    first = h.post({"n": 1}, settings=capped, idempotency_key="k-1")
    h.post({"n": 2}, settings=capped, now=T0 + 1)
    with pytest.raises(QueueFull):
        h.post({"n": 3}, settings=capped, now=T0 + 2)
    again = h.store.post(HOST, "resize", {"n": 1}, settings=capped, posted_by="alice",
                         idempotency_key="k-1", now=T0 + 3)  # fmt: skip
    assert again.replayed and again.task.id == first.id
    assert h.count("pending") == 2


def test_a_reused_key_is_still_refused_when_the_queue_is_full(h):
    capped = replace(SETTINGS, max_pending=1)
    h.post({"n": 1}, settings=capped, idempotency_key="k-1")
    with pytest.raises(IdempotencyKeyReused):
        h.post({"n": 2}, settings=capped, idempotency_key="k-1", now=T0 + 1)


def test_a_batch_of_replays_is_answered_when_the_queue_is_full(h):
    capped = replace(SETTINGS, max_pending=3)
    keyed = [PostEntry(item={"n": i}, idempotency_key=f"k-{i}") for i in range(3)]
    first = h.store.post_many(HOST, "resize", keyed, settings=capped, posted_by="alice", now=T0)
    again = h.store.post_many(HOST, "resize", keyed, settings=capped, posted_by="alice",
                              now=T0 + 1)  # fmt: skip
    assert [a.task.id for a in again] == [f.task.id for f in first]
    assert all(a.replayed for a in again)


def test_a_batch_needs_room_only_for_its_new_tasks(h):
    capped = replace(SETTINGS, max_pending=3)
    old = [PostEntry(item={"n": i}, idempotency_key=f"k-{i}") for i in range(2)]
    h.store.post_many(HOST, "resize", old, settings=capped, posted_by="alice", now=T0)
    mixed = [*old, PostEntry(item={"n": 2})]  # two replays and one new task: room for one
    answers = h.store.post_many(HOST, "resize", mixed, settings=capped, posted_by="alice",
                                now=T0 + 1)  # fmt: skip
    assert [a.replayed for a in answers] == [True, True, False]
    assert h.count("pending") == 3
    with pytest.raises(QueueFull):  # and no room for two new ones
        h.store.post_many(HOST, "resize", [*old, PostEntry(item={"n": 3})], settings=capped,
                          posted_by="alice", now=T0 + 2)  # fmt: skip
