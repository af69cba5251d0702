"""The claim index: what it learns from inotify, and the order a fresh process claims in."""

from __future__ import annotations

import os
import time
from typing import Any

from queues.store import QueueStore, inotify
from queues.store.index import PendingIndex
from queues.store.inotify import IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO, changes

from .conftest import HOST, QUEUE, SETTINGS, T0


def test_a_name_is_where_its_last_event_left_it(tmp_path):
    w = changes()
    sub = w.subscribe(str(tmp_path))
    assert sub is not None
    wd = next(wd for wd, group in w._subs.items() if sub in group)
    sub.drain()  # the first drain is the full listing
    events = [
        ("a.json", IN_MOVED_TO),
        ("a.json", IN_MOVED_FROM),  # claimed: gone, and no read is needed to know it
        ("b.json", IN_MOVED_FROM),
        ("b.json", IN_MOVED_TO),  # claimed, then requeued: back, after more than one event
        ("c.json", IN_CREATE),
        ("d.json", IN_DELETE),
    ]
    with w.lock:
        for name, mask in events:
            w._dispatch(wd, mask, name)
    present = {"a.json": False, "b.json": inotify.AGAIN, "c.json": True, "d.json": False}
    assert sub.drain() == (False, present)


def test_a_subscription_nobody_drains_holds_a_bounded_number_of_names(tmp_path):
    """An index of a queue this process no longer lists or claims from is never drained, while
    other processes churn through new task names there: past a bound it asks for a listing."""
    w = changes()
    sub = w.subscribe(str(tmp_path))
    assert sub is not None
    wd = next(wd for wd, group in w._subs.items() if sub in group)
    sub.drain()
    with w.lock:
        for n in range(inotify.NAMES_HELD + 1):
            w._dispatch(wd, IN_MOVED_TO, f"{n:016x}.json")
    assert len(sub.names) <= inotify.NAMES_HELD
    assert sub.drain() == (True, {})
    w.unsubscribe(sub)
    assert all(sub not in group for group in w._subs.values())


def _settled(store: QueueStore, pending: int) -> int:
    """The other store's writes reach this one's index through inotify, a moment later."""
    deadline = time.monotonic() + 10
    while (count := store.stats(HOST, QUEUE, now=T0).pending) != pending:
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return count


def test_another_writer_moving_a_task_out_and_back_keeps_it_a_candidate(h):
    task = h.post(now=T0)
    other = QueueStore(h.config)  # a second process's view: its own index
    try:
        assert _settled(other, 1) == 1
        [claimed] = other.claim(HOST, QUEUE, settings=SETTINGS, worker="w2", now=T0 + 1)
        assert _settled(h.store, 0) == 0  # moved out: dropped without reading the file
        other.fail(
            HOST, QUEUE, task.id, settings=SETTINGS, worker="w2", attempt=1, retry=True, now=T0 + 2
        )
        assert _settled(h.store, 1) == 1  # moved back in: learned again, with its backoff
        assert h.claim(now=T0 + 3) is None
        assert h.claim(now=T0 + 2 + 60_000).id == task.id == claimed.id
    finally:
        other.close()


def test_a_fresh_process_claims_by_priority_then_postedat_never_by_file_time(h):
    """Guards the ordering rule against an index built from file times: a requeued task's file
    is newer than its postedAt, and a late high-priority post is newer than everything."""
    low_old = h.post(now=T0)
    rewritten = h.post(now=T0 + 1)  # its file rewritten later, as a requeue does
    plain = h.post(now=T0 + 2)
    urgent = h.post(now=T0 + 3, priority=5)
    ages = [(low_old, 40), (rewritten, 50), (plain, 10), (urgent, 60)]  # file times, s
    pending = h.queue_dir / "pending"
    for task, age in ages:
        at = time.time() - 1000 + age
        os.utime(pending / f"{task.id}.json", (at, at))
    h.reopen()
    order = [h.claim(now=T0 + 10 + i).id for i in range(4)]
    assert order == [urgent.id, low_old.id, rewritten.id, plain.id]


def test_a_late_moved_out_event_does_not_drop_a_task_this_process_put_back(h):
    """Retry puts the task back into pending/ and into the index at once; the "moved out"
    event of its earlier claim may be drained after that. It must not drop the task."""
    task = h.post(now=T0)
    h.claim(now=T0 + 1)
    h.store.fail(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1, now=T0 + 2)
    time.sleep(0.2)  # let the real events of the claim and the fail arrive and be drained
    assert _settled(h.store, 0) == 0
    h.store.retry(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 3)
    assert _settled(h.store, 1) == 1
    # Deliver the stale event by hand, last, as the watcher thread may when it runs late.
    w = changes()
    with h.store.queue_dirs(HOST, QUEUE) as qd, h.store.core.lock:
        sub = h.store.core.index(qd)._sub
    wd = next(wd for wd, group in w._subs.items() if sub in group)
    with w.lock:
        w._dispatch(wd, IN_MOVED_FROM, f"{task.id}.json")
    assert h.claim(now=T0 + 4).id == task.id


def _index_entry(h: Any, task_id: str) -> Any:
    with h.store.queue_dirs(HOST, QUEUE) as qd, h.store.core.lock:
        return h.store.core.index(qd).entries.get(task_id)


def test_a_task_this_process_posted_reaches_its_index_without_a_read(h, monkeypatch):
    assert h.claim(now=T0) is None  # the index exists, so the post below notes itself in it
    learned: list[str] = []
    original = PendingIndex.learn
    monkeypatch.setattr(
        PendingIndex,
        "learn",
        lambda self, task_id: (learned.append(task_id), original(self, task_id)),
    )
    task = h.post(now=T0 + 1)
    assert h.claim(now=T0 + 2).id == task.id
    assert learned == []  # its one event since the post was the post's own rename


def test_another_writer_changing_a_task_this_process_posted_is_read_again(h):
    """Our post, then another process's claim and fail with retry, all before this process
    drains its events: the name's last event is an arrival, but not our own post's alone."""
    assert h.claim(now=T0) is None
    task = h.post(now=T0 + 1)
    other = QueueStore(h.config)
    try:
        other.claim(HOST, QUEUE, settings=SETTINGS, worker="w2", now=T0 + 2)
        backoff = other.fail(
            HOST, QUEUE, task.id, settings=SETTINGS, worker="w2", attempt=1, retry=True, now=T0 + 3
        ).task
    finally:
        other.close()
    assert backoff.available_at > T0 + 3
    assert _index_entry(h, task.id)[2] == backoff.available_at  # learned with its backoff


def test_a_drain_reads_every_event_queued_past_one_read_buffer(tmp_path):
    """A read stops at its first that left room for another event; more than a buffer's worth
    queued (long names, thousands of them) all still arrive."""
    sub = changes().subscribe(str(tmp_path))
    assert sub is not None
    sub.drain()
    names = [f"{n:04d}-{'x' * 200}.json" for n in range(1500)]  # ~340 kB of events
    for name in names:
        (tmp_path / name).write_bytes(b"")
    overflowed, drained = sub.drain()
    assert not overflowed and sorted(drained) == names
    changes().unsubscribe(sub)
