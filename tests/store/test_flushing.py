"""Group commit by syncfs: the shared flushes of one process (flushing.GroupFlush) and the store
with `flush="syncfs"`: what it calls, how concurrent operations share it, and its errors."""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from queues.store import PostEntry, QueueStore, StorageUnavailable, StoreConfig, files, flushing

from . import procs
from .conftest import HOST, QUEUE, Harness


def test_syncfs_flushes_a_real_file_system_and_checks_its_errno(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        files.syncfs(fd)  # returns: the file system was written back
    finally:
        os.close(fd)
    with pytest.raises(OSError) as refused:
        files.syncfs(fd)  # closed now
    assert refused.value.errno == errno.EBADF


class Rounds:
    """A flush for GroupFlush that really syncs the file system, and records when each round
    began and ended; `hold` keeps a round from ending until the test lets it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.spans: list[tuple[float, float]] = []
        self.hold: threading.Event | None = None
        self.started = threading.Event()
        self.failing: set[int] = set()  # the rounds (1-based) that report EIO

    def __call__(self) -> None:
        began = time.monotonic()
        self.started.set()
        if self.hold is not None:
            self.hold.wait(10)
        files.syncfs(self.fd)
        self.spans.append((began, time.monotonic()))
        if len(self.spans) in self.failing:
            raise OSError(errno.EIO, os.strerror(errno.EIO))


@pytest.fixture
def rounds(tmp_path: Path):
    fd = os.open(tmp_path, os.O_RDONLY)
    yield Rounds(fd)
    os.close(fd)


def test_a_lone_wait_makes_one_flush(rounds: Rounds) -> None:
    group = flushing.GroupFlush(rounds)
    group.wait()
    assert group.rounds == 1
    group.wait()
    assert group.rounds == 2


def test_a_wait_that_arrives_during_a_flush_is_covered_only_by_the_next(rounds: Rounds) -> None:
    group = flushing.GroupFlush(rounds)
    rounds.hold = threading.Event()
    first = threading.Thread(target=group.wait)
    first.start()
    assert rounds.started.wait(10)  # round 1 runs, held
    returned: list[float] = []
    late = [threading.Thread(target=lambda: (group.wait(), returned.append(time.monotonic())))
            for _ in range(5)]  # fmt: skip
    arrived = time.monotonic()
    for t in late:
        t.start()
    time.sleep(0.05)
    assert returned == []  # round 1 does not cover them
    rounds.hold.set()
    first.join(10)
    for t in late:
        t.join(10)
    assert len(returned) == 5
    assert group.rounds == 2  # the five late waiters shared one round, the second
    second_began, second_ended = rounds.spans[1]
    assert second_began >= arrived and all(r >= second_ended for r in returned)


def test_concurrent_waits_share_flushes_and_none_returns_before_its_flush(
    rounds: Rounds,
) -> None:
    group = flushing.GroupFlush(rounds)
    calls: list[tuple[float, float]] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(20):
            called = time.monotonic()
            group.wait()
            with lock:
                calls.append((called, time.monotonic()))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(calls) == 160
    assert group.rounds < 160  # shared
    for called, returned in calls:  # a round that began after the call ended before the return
        assert any(called <= b and e <= returned for b, e in rounds.spans), (called, returned)


def test_a_failed_flush_fails_every_wait_it_covered_and_the_next_one_succeeds(
    rounds: Rounds,
) -> None:
    group = flushing.GroupFlush(rounds)
    rounds.hold, rounds.failing = threading.Event(), {2}
    leader = threading.Thread(target=group.wait)
    leader.start()
    assert rounds.started.wait(10)  # round 1 runs, held; the four below wait for round 2
    outcomes: list[BaseException | None] = []

    def waiter() -> None:
        try:
            group.wait()
            outcomes.append(None)
        except StorageUnavailable as exc:
            outcomes.append(exc)

    covered = [threading.Thread(target=waiter) for _ in range(4)]
    for t in covered:
        t.start()
    time.sleep(0.05)
    rounds.hold.set()
    leader.join(10)  # round 1 succeeded
    for t in covered:
        t.join(10)
    assert group.rounds == 2  # the four shared round 2, which failed every one of them
    assert len(outcomes) == 4 and all(isinstance(o, StorageUnavailable) for o in outcomes)
    assert "Input/output error" in str(outcomes[0])
    group.wait()  # a later round is a new flush, and succeeds


def test_each_flush_is_reported_to_the_observers(rounds: Rounds) -> None:
    seen: list[float] = []
    flushing.FLUSH_OBSERVERS.append(seen.append)
    try:
        flushing.GroupFlush(rounds).wait()
    finally:
        flushing.FLUSH_OBSERVERS.remove(seen.append)
    assert len(seen) == 1 and seen[0] >= 0


# -- the store with flush="syncfs" -----------------------------------------------------------


@pytest.fixture
def hs(tmp_path: Path):
    h = Harness(tmp_path, fsync=True, flush="syncfs")
    h.store.create_queue(HOST, QUEUE)
    yield h
    files.FAULTS.reset()
    h.close()


def test_a_batch_post_flushes_once_after_its_line_with_no_fsync(hs: Harness) -> None:
    """Fresh files written, renamed, their lines appended, then one syncfs for all of it
    (store.md, fourth version; issue 34: three flushes before)."""
    files.FAULTS.reset()
    files.FAULTS.record = True
    hs.store.post_many(HOST, QUEUE, [PostEntry(item={"n": i}) for i in range(10)],
                       settings=procs.LONG, posted_by="a")  # fmt: skip
    kinds = files.FAULTS.kinds
    assert "fsync" not in kinds and "fsync_dir" not in kinds
    syncs = [i for i, k in enumerate(kinds) if k == "syncfs"]
    renames = [i for i, k in enumerate(kinds) if k == "rename"]
    writes = [i for i, k in enumerate(kinds) if k == "write"]
    assert len(syncs) == 1 and len(renames) == 10
    assert max(writes) < min(renames) and max(renames) < kinds.index("append") < syncs[0]


def test_a_lone_post_and_result_flush_once_and_a_claim_never(hs: Harness) -> None:
    counted = []
    for verb in ("post", "claim", "finish"):
        files.FAULTS.reset()
        files.FAULTS.record = True
        if verb == "post":
            task = hs.store.post(HOST, QUEUE, {"n": 1}, settings=procs.LONG, posted_by="a").task
        elif verb == "claim":
            hs.store.claim(HOST, QUEUE, settings=procs.LONG, worker="w")
        else:
            hs.store.finish(HOST, QUEUE, task.id, settings=procs.LONG, worker="w", attempt=1,
                            result={"r": 1})  # fmt: skip
        counted.append(files.FAULTS.kinds.count("syncfs"))
    assert counted == [1, 0, 1]


def test_threads_of_one_process_share_the_store_s_flushes(hs: Harness) -> None:
    files.FAULTS.reset()
    files.FAULTS.record = True

    def poster() -> None:
        for n in range(10):
            hs.store.post(HOST, QUEUE, {"n": n}, settings=procs.LONG, posted_by="a")

    threads = [threading.Thread(target=poster) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(list((hs.queue_dir / "pending").glob("*.json"))) == 80
    # alone, each post makes one flush (its file, its name and its line together)
    assert files.FAULTS.kinds.count("syncfs") < 80


def test_a_failed_syncfs_fails_the_batch_unacknowledged(hs: Harness) -> None:
    """The one flush after the lines fails: the batch is refused and taken back out of
    pending/ (its lines, written whole, stand: a reader may have read them)."""
    files.FAULTS.reset()
    files.FAULTS.fail_kind, files.FAULTS.fail_at = "syncfs", 1
    with pytest.raises(StorageUnavailable):
        hs.store.post_many(HOST, QUEUE, [PostEntry(item={"n": i}) for i in range(3)],
                           settings=procs.LONG, posted_by="a")  # fmt: skip
    files.FAULTS.reset()
    assert hs.temp_files() == []
    assert list((hs.queue_dir / "pending").glob("*.json")) == []


def test_a_failed_syncfs_of_a_single_post_leaves_nothing(hs: Harness) -> None:
    files.FAULTS.reset()
    files.FAULTS.fail_kind, files.FAULTS.fail_at = "syncfs", 1
    with pytest.raises(StorageUnavailable):
        hs.store.post(HOST, QUEUE, {"n": 1}, settings=procs.LONG, posted_by="a")
    files.FAULTS.reset()
    assert hs.temp_files() == [] and list((hs.queue_dir / "pending").glob("*.json")) == []


def test_logs_on_another_file_system_get_their_own_fdatasync(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system (/dev/shm) here")
    logs = Path(os.path.join(shm, f"taskhoster-logs-{os.getpid()}-{time.monotonic_ns()}"))
    store = QueueStore(
        StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=True, flush="syncfs")
    )
    try:
        store.create_queue(HOST, QUEUE)
        files.FAULTS.reset()
        files.FAULTS.record = True
        store.post(HOST, QUEUE, {"n": 1}, settings=procs.LONG, posted_by="a")
        kinds = files.FAULTS.kinds
        assert kinds[kinds.index("append") + 1] == "fsync"  # the log's fdatasync
        # then one syncfs of the items' disk: the task file and its name (files.deferred)
        assert kinds.count("syncfs") == 1 and kinds.index("syncfs") > kinds.index("append")
    finally:
        files.FAULTS.reset()
        store.close()
        shutil.rmtree(logs, ignore_errors=True)


def test_an_unknown_flush_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="flush must be one of"):
        QueueStore(StoreConfig(items_dir=tmp_path / "i", logs_dir=tmp_path / "l", flush="sync"))


@pytest.mark.parametrize("last", ["fsync", "syncfs"])
def test_two_stores_of_one_process_each_keep_their_own_flush_mode(
    tmp_path: Path, last: str
) -> None:
    """The mode is each store's own: opening a second store with the other mode (the one
    opened last, either way round) changes nothing of how the first one flushes."""
    first_mode = "syncfs" if last == "fsync" else "fsync"
    stores = {}
    for mode in (first_mode, last):
        stores[mode] = QueueStore(
            StoreConfig(
                items_dir=tmp_path / mode / "i",
                logs_dir=tmp_path / mode / "l",
                fsync=True,
                flush=mode,
            )
        )
        stores[mode].create_queue(HOST, QUEUE)
    try:
        for mode, store in stores.items():
            files.FAULTS.reset()
            files.FAULTS.record = True
            store.post(HOST, QUEUE, {"n": 1}, settings=procs.LONG, posted_by="a")
            kinds = files.FAULTS.kinds
            if mode == "syncfs":
                assert kinds.count("syncfs") == 1 and "fsync" not in kinds, kinds
            else:
                assert "syncfs" not in kinds and "fsync_dir" in kinds, kinds
    finally:
        files.FAULTS.reset()
        for store in stores.values():
            store.close()
