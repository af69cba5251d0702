"""The counts of processing/ and done/ kept by names: the same numbers as a listing of each
directory, while this and another process change the queue, without inotify, after lost
events, and with a queue closed and opened again; and no listing when nothing was lost."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from queues.store import paths
from queues.store.dircount import DirCounts, NameCount
from queues.store.inotify import IN_Q_OVERFLOW, changes

from . import procs
from .conftest import HOST, QUEUE, SETTINGS, T0, Harness


def listed(h, directory: str) -> int:
    return sum(1 for n in os.listdir(h.queue_dir / directory) if paths.task_id_of(n))


def same_as_listing(h) -> None:
    stats = h.store.stats(HOST, QUEUE, now=T0 + 5000)
    assert (stats.processing, stats.done) == (listed(h, "processing"), listed(h, "done"))


def counter(h, directory: str) -> NameCount:
    return h.store.core.dir_counts._queues[(HOST, QUEUE)].dirs[directory]


def test_counts_follow_this_processes_changes_with_one_listing(h):
    for n in range(6):
        h.post(now=T0 + n)
    same_as_listing(h)
    for _ in range(4):
        h.claim()
        same_as_listing(h)
    task = h.claim()
    h.store.finish(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1,
                   result=None, now=T0 + 2000)  # fmt: skip
    h.store.cancel(HOST, QUEUE, h.post(now=T0 + 9).id, settings=SETTINGS, now=T0 + 3000)
    same_as_listing(h)
    assert h.store.stats(HOST, QUEUE).processing == 4 and h.store.stats(HOST, QUEUE).done == 2
    if changes().available:  # names came from inotify: the first look was the only listing
        assert counter(h, "done").listings == counter(h, "processing").listings == 1


def test_counts_follow_another_process(h):
    h.post()
    same_as_listing(h)
    ctx = mp.get_context("spawn")
    commands, replies = ctx.Queue(), ctx.Queue()
    partner = ctx.Process(target=procs.listing_partner,
                          args=(str(h.config.items_dir), str(h.config.logs_dir), commands,
                                replies))  # fmt: skip
    partner.start()
    try:
        for step in [("post", 10), ("claim", 8), ("finish", 5), ("claim", 4), ("finish", 9)]:
            commands.put(step)
            assert replies.get(timeout=60) == step
            same_as_listing(h)
    finally:
        commands.put(None)
        partner.join(60)
    assert partner.exitcode == 0


def test_lost_events_list_the_directory_again(h):
    task = h.post()
    h.claim()
    same_as_listing(h)
    os.rename(h.queue_dir / "processing" / f"{task.id}.json",
              h.queue_dir / "done" / f"{task.id}.json")  # fmt: skip
    (h.queue_dir / "done" / "0123456789abcdef.json").write_bytes(b"{}")
    log = changes()
    with log.lock:  # the kernel's queue overflowed: every subscriber must list again
        log._dispatch(-1, IN_Q_OVERFLOW, "")
    same_as_listing(h)
    assert h.store.stats(HOST, QUEUE).done == 2  # names are counted, records never read


def test_without_inotify_a_directory_is_listed_when_its_mtime_moves(h):
    qd = h.held(create=True)
    count = NameCount(None, qd.proc_path("done"))
    assert count.refresh(qd.fd("done")) == 0
    for n in range(3):
        (h.queue_dir / "done" / f"{n:016x}.json").write_bytes(b"{}")
        (h.queue_dir / "done" / f".tmp-{n}").write_bytes(b"")  # not a task file
        assert count.refresh(qd.fd("done")) == n + 1
    os.unlink(h.queue_dir / "done" / f"{0:016x}.json")
    assert count.refresh(qd.fd("done")) == 2
    old = count.listings
    past = os.stat(h.queue_dir / "done").st_mtime_ns - 10**9  # a settled directory...
    os.utime(h.queue_dir / "done", ns=(past, past))
    count.refresh(qd.fd("done"))
    count.refresh(qd.fd("done"))
    assert count.listings == old + 1  # ...is listed once, then trusted while its mtime stays


def test_counts_of_queues_closed_and_let_go(tmp_path):
    """Counts follow a queue that was closed (its descriptors and subscriptions went) and
    opened again, and only `keep` queues keep theirs."""
    h = Harness(tmp_path)
    counts = DirCounts(changes, keep=1)
    try:
        a, b = h.held("a", create=True), h.held("b", create=True)
        (h.config.items_dir / HOST / "a" / "done" / f"{1:016x}.json").write_bytes(b"{}")
        assert counts.counts(a) == {"processing": 0, "done": 1}
        assert counts.counts(b) == {"processing": 0, "done": 0}  # a is let go
        (h.config.items_dir / HOST / "a" / "done" / f"{2:016x}.json").write_bytes(b"{}")
        assert counts.counts(a)["done"] == 2
        counts.drop(HOST, "a")
        counts.drop(HOST, "nowhere")
        assert counts.counts(a)["done"] == 2
    finally:
        counts.close()
        h.close()


def test_a_store_with_one_open_queue_counts_each_queue_right(tmp_path):
    from dataclasses import replace

    h = Harness(tmp_path)
    h.store.close()
    h.store = type(h.store)(replace(h.config, open_queues=1))
    try:
        h.store.create_queue(HOST, "a")
        h.store.create_queue(HOST, "b")
        for turn, queue in enumerate(("a", "b", "a", "b")):
            h.store.post(HOST, queue, {"n": 1}, settings=SETTINGS, posted_by=None)
            h.store.claim(HOST, queue, settings=SETTINGS, worker="w")
            running = (h.store.stats(HOST, "a").processing, h.store.stats(HOST, "b").processing)
            assert running == ((turn + 2) // 2, (turn + 1) // 2)
    finally:
        h.close()


def test_a_reader_of_changes_gets_them_in_order_or_every_id_when_they_were_not_kept(h, monkeypatch):
    """DirCounts.since (the flow gate's keys follow processing/ by it): the changes after the
    reader's last look, in order; every id instead after lost events (a listing) or when the
    reader fell further behind than the changes kept."""
    if not changes().available:
        pytest.skip("without inotify every change is a listing: the reader always gets ids")
    from queues.store import dircount

    for n in range(8):
        h.post(now=T0 + n)
    qd = h.held(create=True)
    dirs = h.store.core.dir_counts
    first = dirs.since(qd, "processing", -1, 0)
    assert (first.total, first.changes, first.ids) == (0, None, set())
    a, b = h.claim(), h.claim()
    now = dirs.since(qd, "processing", first.epoch, first.end)
    assert now.total == 2 and now.changes == [(a.id, True), (b.id, True)] and now.ids is None
    h.store.finish(HOST, QUEUE, a.id, settings=SETTINGS, worker="box-1", attempt=1,
                   result=None, now=T0 + 2000)  # fmt: skip
    again = dirs.since(qd, "processing", now.epoch, now.end)
    assert again.total == 1 and again.changes == [(a.id, False)]
    log = changes()
    with log.lock:  # the kernel's queue overflowed: processing/ is listed again
        log._dispatch(-1, IN_Q_OVERFLOW, "")
    lost = dirs.since(qd, "processing", again.epoch, again.end)
    assert lost.epoch != again.epoch and (lost.changes, lost.ids) == (None, {b.id})
    monkeypatch.setattr(dircount, "_JOURNAL_KEPT", 4)  # so that a few claims outrun it
    claimed = [h.claim().id for _ in range(5)]
    behind = dirs.since(qd, "processing", lost.epoch, lost.end)
    assert behind.changes is None and behind.ids == {b.id, *claimed} and behind.total == 6
    recent = dirs.since(qd, "processing", behind.epoch, behind.end)
    assert recent.changes == [] and recent.epoch == behind.epoch
