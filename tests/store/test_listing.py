"""Listing a queue from the listing index: the same pages as a full scan of every record, kept
right while this and other processes change the queue, and reading only the page's records."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.store import ANY, QueueStore, State, StoreConfig, Task, TaskPage, copies, files, paths
from queues.store.inotify import IN_Q_OVERFLOW, changes
from queues.store.listing_index import ListingIndex, ListingIndexes
from queues.store.paths import QueueDirs
from queues.store.results import _Any

from . import procs
from .conftest import HOST, QUEUE, T0, Harness

POSTERS: list[str | _Any | None] = [ANY, None, "alice", "bob"]


def full_scan(
    qd: QueueDirs,
    status: State | None = None,
    posted_by: str | _Any | None = ANY,
    limit: int = 50,
    offset: int = 0,
) -> TaskPage:
    """What a listing must answer, the straightforward way: every task's winning copy (as
    copies.py chooses it), filtered, newest first by (postedAt, seq, id)."""
    ids = {paths.task_id_of(name) for d in paths.STATE_DIRS for name in os.listdir(qd.fd(d))}
    winners = [found[0].task for i in ids if i is not None and (found := copies.copies(qd, i))]
    matching = [
        t
        for t in winners
        if (status is None or t.status is status)
        and (isinstance(posted_by, _Any) or t.posted_by == posted_by)
    ]
    matching.sort(key=lambda t: (t.posted_at, t.seq, t.id), reverse=True)
    return TaskPage(count=len(matching), tasks=matching[offset : offset + limit])


def record(task_id: str, status: State, posted_by: str | None, posted_at: int, rev: int) -> Task:
    return Task(
        id=task_id,
        host=HOST,
        queue=QUEUE,
        status=status,
        item={"n": task_id},
        posted_by=posted_by,
        posted_at=posted_at,
        updated_at=posted_at + rev,
        attempts=0 if status is State.PENDING else 1,
        rev=rev,
    )


def put(qd: QueueDirs, directory: str, task: Task) -> None:
    data = orjson.dumps(task.to_record())
    files.write_durable(qd.fd(directory), paths.task_file(task.id), data, fsync=False)


def put_bytes(qd: QueueDirs, directory: str, task_id: str, data: bytes) -> None:
    files.write_durable(qd.fd(directory), paths.task_file(task_id), data, fsync=False)


# -- the new listing against a full scan ------------------------------------------------------

statuses = st.sampled_from(list(State))
tasks_on_disk = st.lists(
    st.tuples(
        statuses,
        st.sampled_from(["alice", "bob", None]),
        st.integers(0, 4),  # postedAt offset: few values, so ties are common
        st.integers(1, 4),  # rev
        st.none() | st.tuples(statuses, st.integers(0, 5)),  # a second copy: (status, rev)
    ),
    max_size=14,
)
corrupt_files = st.lists(
    st.tuples(
        st.sampled_from(paths.STATE_DIRS),
        st.sampled_from([b"{", b"[]", b'{"id": 1}', b"mismatch"]),
    ),
    max_size=3,
)
queries = st.lists(
    st.tuples(
        st.none() | statuses, st.sampled_from(POSTERS), st.integers(0, 6), st.integers(0, 16)
    ),
    min_size=1,
    max_size=4,
)
changes_on_disk = st.lists(
    st.tuples(
        st.sampled_from(["move", "interrupted move", "rewrite", "delete", "post", "corrupt"]),
        st.integers(0, 1000),
        statuses,
    ),
    max_size=8,
)


def write_queue(qd: QueueDirs, spec: list[Any], corrupt: list[Any]) -> list[str]:
    ids = []
    for k, (status, posted_by, at, rev, second) in enumerate(spec):
        task = record(f"{k:016x}", status, posted_by, T0 + at, rev)
        put(qd, status.directory, task)
        if second is not None and second[0].directory != status.directory:
            put(qd, second[0].directory, dataclasses.replace(task, status=second[0], rev=second[1]))
        ids.append(task.id)
    for k, (directory, data) in enumerate(corrupt):
        task_id = f"{0xC000 + k:016x}"
        if data == b"mismatch":  # a valid record under another task's name
            data = orjson.dumps(record("f" * 16, State.PENDING, None, T0, 1).to_record())
        put_bytes(qd, directory, task_id, data)
    return ids


def change_queue(qd: QueueDirs, ids: list[str], steps: list[Any]) -> None:
    """Changes straight on disk, as another process's writes, crashes and the sweep make them."""
    for n, (kind, pick, status) in enumerate(steps):
        if kind == "post":
            task = record(f"{0xA000 + n:016x}", status, "bob", T0 + pick % 5, 1)
            put(qd, status.directory, task)
            ids.append(task.id)
            continue
        task_id = ids[pick % len(ids)] if ids else None
        found = copies.copies(qd, task_id) if task_id else []
        if not found:
            continue
        best = found[0]
        if kind == "delete":
            for copy in found:
                os.unlink(paths.task_file(task_id), dir_fd=qd.fd(copy.directory))
        elif kind == "corrupt":
            put_bytes(qd, best.directory, task_id, b'{"id": "' + task_id.encode())
        elif kind == "rewrite":  # in place, the same status: progress, a fetch stamp
            put(qd, best.directory, best.task.replace(updated_at=best.task.updated_at + 1))
        else:  # content first into the new directory, then the old copy goes (or, cut short,
            # stays behind with the lower rev)
            put(qd, status.directory, best.task.replace(status=status))
            if kind == "move" and status.directory != best.directory:
                os.unlink(paths.task_file(task_id), dir_fd=qd.fd(best.directory))


def same_pages(qd: QueueDirs, listing: Any, asked: list[Any]) -> None:
    for status, posted_by, limit, offset in asked:
        got = listing(status, posted_by, limit, offset)
        assert got == full_scan(qd, status, posted_by, limit, offset), (status, posted_by)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=tasks_on_disk, corrupt=corrupt_files, asked=queries, steps=changes_on_disk)
def test_pages_are_those_of_a_full_scan_before_and_after_changes(spec, corrupt, asked, steps):
    """Both ways an index learns: inotify names (the store's own index), and listings of the
    directories whose mtime moved (an index without inotify)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = StoreConfig(items_dir=Path(tmp) / "items", logs_dir=Path(tmp) / "logs")
        store = QueueStore(config)
        try:
            with store.queue_dirs(HOST, QUEUE, create=True) as qd:
                ids = write_queue(qd, spec, corrupt)
                by_inotify = lambda s, p, limit, offset: store.list_tasks(  # noqa: E731
                    HOST, QUEUE, status=s, posted_by=p, limit=limit, offset=offset
                )
                by_listing = ListingIndex(qd, None)
                without_inotify = lambda s, p, limit, offset: by_listing.page(  # noqa: E731
                    qd, State(s) if s else None, p, limit, offset
                )
                for listing in (by_inotify, without_inotify):
                    same_pages(qd, listing, asked)
                change_queue(qd, ids, steps)
                for listing in (by_inotify, without_inotify):
                    same_pages(qd, listing, asked)
        finally:
            store.close()


def test_a_task_in_two_directories_is_listed_once_under_its_winning_status(h):
    """A requeue cut short between its two steps leaves the task in pending/ (rev 3, the winner)
    and processing/ (rev 2): a filter on processing must not find it there."""
    task = h.post(now=T0)
    qd = h.held(QUEUE)
    put(qd, "processing", record(task.id, State.PROCESSING, "alice", T0, 2))
    put(qd, "pending", record(task.id, State.PENDING, "alice", T0, 3))
    assert h.store.list_tasks(HOST, QUEUE, status="processing") == TaskPage(count=0, tasks=[])
    pending = h.store.list_tasks(HOST, QUEUE, status="pending")
    assert pending.count == 1 and [(t.id, t.rev) for t in pending.tasks] == [(task.id, 3)]
    assert h.store.list_tasks(HOST, QUEUE).count == 1


# -- what a page costs -----------------------------------------------------------------------


def _reads_by_this_thread() -> int:
    """read(2) calls this thread has made: the kernel's count, nothing of ours to trust."""
    with open("/proc/thread-self/io", "rb") as io:
        return int(dict(line.split(b": ") for line in io.read().splitlines())[b"syscr"])


def test_a_page_reads_only_its_own_records(h):
    for n in range(300):
        h.post(now=T0 + n, posted_by="alice" if n % 2 else "bob")
    h.store.list_tasks(HOST, QUEUE, limit=1)  # the process learns every file, once
    before = _reads_by_this_thread()
    deep = h.store.list_tasks(HOST, QUEUE, posted_by="bob", limit=10, offset=120)
    first = h.store.list_tasks(HOST, QUEUE, status="pending", limit=10)
    reads = _reads_by_this_thread() - before
    assert deep.count == 150 and len(deep.tasks) == 10 and len(first.tasks) == 10
    # two read(2) per record (the data, then the end), a few for inotify and /proc: a scan of
    # all 300 records made 600 or more
    assert reads <= 2 * 20 + 10, reads


def test_a_warm_index_learns_only_what_changed(h):
    for n in range(40):
        h.post(now=T0 + n)
    index = h.store.core.listings.of(h.held(QUEUE))
    h.store.list_tasks(HOST, QUEUE, limit=5)
    assert index.records_learned == 40
    h.claim(now=T0 + 100)
    h.post(now=T0 + 101)
    page = h.store.list_tasks(HOST, QUEUE, limit=5, offset=30)
    # the claim's two arrivals in processing/ (the rename, then the leased record) reach the
    # index as one name; the post is the other; nothing else is read again
    assert index.records_learned - 40 == 2
    assert index.records_paged == 5 + 5 and len(page.tasks) == 5


def test_a_corrupt_file_is_skipped_and_breaks_no_page(h):
    tasks = [h.post(now=T0 + n) for n in range(5)]
    h.store.list_tasks(HOST, QUEUE)
    put_bytes(h.held(QUEUE), "pending", "00000000000000ff", b'{"id": "0')
    page = h.store.list_tasks(HOST, QUEUE, limit=3, offset=1)
    assert page.count == 5 and [t.id for t in page.tasks] == [t.id for t in tasks[::-1][1:4]]


# -- staying right -----------------------------------------------------------------------------


def test_a_task_gone_between_the_index_and_its_read_is_refilled(tmp_path):
    """Without inotify, and with the directory's mtime put back, the index cannot know: the
    page's read finds the file gone, learns the task again and chooses the page again."""
    h = Harness(tmp_path)
    try:
        tasks = [h.post(now=T0 + n) for n in range(8)]
        qd = h.held(QUEUE)
        pending = h.queue_dir / "pending"
        old = (1_700_000_000, 1_700_000_000)
        for d in paths.STATE_DIRS:
            os.utime(h.queue_dir / d, old)
        index = ListingIndex(qd, None)
        newest = [t.id for t in tasks[::-1]]
        assert [t.id for t in index.page(qd, None, ANY, 3, 0).tasks] == newest[:3]
        os.unlink(pending / f"{newest[1]}.json")
        os.utime(pending, old)
        page = index.page(qd, None, ANY, 3, 0)
        assert page.count == 7 and [t.id for t in page.tasks] == [newest[0], *newest[2:4]]
    finally:
        h.close()


def test_a_listing_of_the_directory_reads_again_a_file_replaced_under_the_same_inode(h):
    """Without inotify (or after lost events) a listing of the directory is all the index has:
    a file rewritten in place keeps its inode, as a replaced file often gets its predecessor's
    freed inode number back; the mtime tells them apart."""
    qd = h.held(QUEUE, create=True)
    task = record("00000000000000a1", State.FINISHED, "alice", T0, 3)
    put(qd, "done", task)
    path = h.queue_dir / "done" / f"{task.id}.json"
    os.utime(path, (1_700_000_000, 1_700_000_000))  # an old file: its mtime can be trusted
    others = [record(f"{n:016x}", State.PENDING, "bob", T0 + n, 1) for n in range(5)]
    for other in others:
        put(qd, "pending", other)
        os.utime(h.queue_dir / "pending" / f"{other.id}.json", (1_700_000_000, 1_700_000_000))
    index = ListingIndex(qd, None)
    assert index.page(qd, State.FINISHED, ANY, 5, 0).count == 1
    assert index.records_learned == 6
    assert index.page(qd, None, ANY, 5, 0).count == 6
    assert index.records_learned == 6  # listed again (young directories), nothing read again
    inode = path.stat().st_ino
    path.write_bytes(orjson.dumps(dataclasses.replace(task, status=State.CANCELLED).to_record()))
    os.utime(path, (1_700_000_100, 1_700_000_100))  # and it too was rewritten a while ago
    assert path.stat().st_ino == inode
    # asked first for what the index cannot have read yet: no page read would put it right
    assert [t.id for t in index.page(qd, State.CANCELLED, ANY, 5, 0).tasks] == [task.id]
    assert index.page(qd, State.FINISHED, ANY, 5, 0).count == 0


def test_lost_events_list_the_directories_again_and_catch_a_rewritten_file(h):
    """After an inotify overflow the index lists the three directories; a task that left done/
    and came back with another status (a retry run to failure) has a new inode there."""
    finished = h.post(now=T0)
    other = h.post(now=T0 + 1)
    qd = h.held(QUEUE)
    done = record(finished.id, State.FINISHED, "alice", T0, 3)
    put(qd, "done", done)
    os.unlink(h.queue_dir / "pending" / f"{finished.id}.json")
    assert h.store.list_tasks(HOST, QUEUE, status="finished").count == 1
    put(qd, "done", done.replace(status=State.FAILED))  # retried, claimed and failed since
    os.unlink(h.queue_dir / "pending" / f"{other.id}.json")
    log = changes()
    with log.lock:  # the kernel's queue overflowed: every subscriber must list again
        log._dispatch(-1, IN_Q_OVERFLOW, "")
    assert h.store.list_tasks(HOST, QUEUE) == full_scan(qd)
    assert h.store.list_tasks(HOST, QUEUE, status="failed").count == 1
    assert h.store.list_tasks(HOST, QUEUE, status="finished").count == 0


def test_a_listing_stays_right_while_another_process_posts_claims_and_finishes(h):
    for n in range(30):
        h.post(now=T0 + n, posted_by=["alice", "bob", None][n % 3])
    qd = h.held(QUEUE)
    asked = [
        (status, posted_by, limit, offset)
        for status in (None, State.PENDING, State.PROCESSING, State.FINISHED)
        for posted_by in (ANY, "bob", None)
        for limit, offset in ((7, 0), (7, 7), (50, 0), (5, 25))
    ]

    def listing(s: State | None, p: Any, limit: int, offset: int) -> TaskPage:
        return h.store.list_tasks(
            HOST, QUEUE, status=s.value if s else None, posted_by=p, limit=limit, offset=offset
        )

    same_pages(qd, listing, asked)
    ctx = mp.get_context("spawn")
    commands, replies = ctx.Queue(), ctx.Queue()
    partner = ctx.Process(
        target=procs.listing_partner,
        args=(str(h.config.items_dir), str(h.config.logs_dir), commands, replies),
    )
    partner.start()
    try:
        for step in [("post", 20), ("claim", 12), ("finish", 6), ("post", 5), ("claim", 9),
                     ("finish", 9), ("claim", 40)]:  # fmt: skip
            commands.put(step)
            assert replies.get(timeout=60) == step  # done, and so in the kernel's event queue
            same_pages(qd, listing, asked)
    finally:
        commands.put(None)
        partner.join(60)
    assert partner.exitcode == 0


def test_only_the_most_recently_listed_queues_keep_an_index(tmp_path):
    """An index the process let go stops being fed names: its subscriptions are gone."""
    h = Harness(tmp_path)
    listings = ListingIndexes(changes, keep=2)
    try:
        dirs = {}
        for queue in ("a", "b", "c"):
            dirs[queue] = qd = h.held(queue, create=True)
            task = record(f"{ord(queue):016x}", State.PENDING, None, T0, 1)
            put(qd, "pending", task.replace(queue=queue))  # a record of the queue it lies in
        a, b = listings.of(dirs["a"]), listings.of(dirs["b"])
        subscribed = {name: set(index._subs.values()) for name, index in (("a", a), ("b", b))}
        listings.of(dirs["a"])  # a is listed again, so b is now the one listed longest ago
        listings.of(dirs["c"])
        held = {sub for group in changes()._subs.values() for sub in group}
        assert subscribed["a"] <= held and not subscribed["b"] & held
        assert listings.of(dirs["a"]) is a and listings.of(dirs["b"]) is not b
        page = listings.page(dirs["b"], status=None, posted_by=ANY, limit=5, offset=0)
        assert page == full_scan(dirs["b"]) and page.count == 1
    finally:
        listings.close()
        h.close()
