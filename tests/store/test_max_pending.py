"""maxPending is exact: posts racing from many processes never take a queue past its cap.

A post used to count the pending tasks, then write: eight posters into a queue one short of full
all counted one free place and all wrote. Retries and requeues into pending are not posts and
are not capped."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from dataclasses import replace

import pytest

from queues.store import QueueFull

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
