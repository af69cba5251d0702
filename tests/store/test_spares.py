"""Spare inodes (store.md, fourth version; queues.store.spares): a syncfs store's batches write
into spares and retire into them, nothing that tells files apart by inode or stamp is fooled
when an inode comes back under another name or the same one, the sweep keeps the pool within
its bound, and without renameat2 the store writes fresh inodes as before."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from queues.store import PostEntry, Report, files, spares, stamps, sweep_queue

from .conftest import HOST, QUEUE, SETTINGS, T0, Harness

WORKER = "box-1"
KEEP = replace(SETTINGS, retain_seconds=3600)


@pytest.fixture
def h(tmp_path: Path):
    harness = Harness(tmp_path, fsync=True, flush="syncfs")
    harness.store.create_queue(HOST, QUEUE)
    yield harness
    harness.close()


def _spare_inodes(h: Harness) -> set[int]:
    return {p.stat().st_ino for p in (h.queue_dir / "spare").iterdir()}


def _inodes(h: Harness, directory: str) -> dict[str, int]:
    return {p.stem: p.stat().st_ino for p in (h.queue_dir / directory).glob("*.json")}


def _round(h: Harness, n: int, *, now: int) -> list[str]:
    """Post n in one batch, claim them, finish them in one batch: their ids."""
    posted = h.store.post_many(HOST, QUEUE, [PostEntry(item={"n": i}) for i in range(n)],
                               settings=KEEP, posted_by="alice", now=now)  # fmt: skip
    ids = [p.task.id for p in posted]
    claimed = h.store.claim(HOST, QUEUE, settings=KEEP, worker=WORKER, max_tasks=n, now=now + 1)
    assert sorted(t.id for t in claimed) == sorted(ids)
    reports = [Report(task_id=t, attempt=1, outcome="result", result={"t": t}) for t in ids]
    h.store.finish_many(HOST, QUEUE, reports, settings=KEEP, worker=WORKER, now=now + 2)
    return ids


def test_a_batch_writes_into_spares_and_retires_into_them(h: Harness) -> None:
    first = _round(h, 10, now=T0)
    retired = _spare_inodes(h)
    assert len(retired) == 10  # the processing/ records the finish moved away
    # the next batch post takes them: its tasks' files are the inodes of the first round's
    # leased records, under other names
    posted = h.store.post_many(HOST, QUEUE, [PostEntry(item={"m": i}) for i in range(10)],
                               settings=KEEP, posted_by="bob", now=T0 + 10)  # fmt: skip
    pending = _inodes(h, "pending")
    assert set(pending.values()) == retired and _spare_inodes(h) == set()
    # every record reads back whole as its own, listings and counts are not fooled
    for p in posted:
        record = orjson.loads((h.queue_dir / "pending" / f"{p.task.id}.json").read_bytes())
        assert record["id"] == p.task.id and record["item"] == p.task.item
        assert h.store.read(HOST, QUEUE, p.task.id).status.value == "pending"
    for t in first:
        assert h.store.read(HOST, QUEUE, t).status.value == "finished"
    stats = h.store.stats(HOST, QUEUE, now=T0 + 10)
    assert (stats.pending, stats.done) == (10, 10), stats
    # the claim index serves the new tasks, each once
    claimed = h.store.claim(HOST, QUEUE, settings=KEEP, worker=WORKER, max_tasks=20, now=T0 + 11)
    assert sorted(t.id for t in claimed) == sorted(p.task.id for p in posted)


def test_an_inode_back_under_its_own_name_is_read_anew(h: Harness) -> None:
    """done/X's inode retired into the spares and written again under done/X with another
    record of X: the sweep's cache of done records (stamps) reads it again, and retention
    follows the new record, not the one it learned."""
    (task_id,) = _round(h, 1, now=T0)
    sweep_queue(h.store, HOST, QUEUE, KEEP, now=T0 + 100)  # learns done/X and its retention
    time.sleep(stamps.RACY_NS / 1e9 * 1.5)  # the learned stamp is trusted from now on
    sweep_queue(h.store, HOST, QUEUE, KEEP, now=T0 + 200)
    done = h.queue_dir / "done" / f"{task_id}.json"
    inode = done.stat().st_ino
    record = orjson.loads(done.read_bytes())
    old_end = record["finishedAt"]
    record["finishedAt"] = record["updatedAt"] = old_end - 7200 * 1000  # retention long over
    time.sleep(0.01)  # a later tick of the file clock than the learned stamp's
    with h.store.queue_dirs(HOST, QUEUE) as qd:
        # only spare: done/X's own inode, written again and named done/X once more
        for p in (h.queue_dir / "spare").iterdir():
            p.unlink()
        spares.retire(qd, qd.fd("done"), done.name, into_spares=True)
        spares.write_all(qd, [(qd.fd("done"), done.name, orjson.dumps(record), False)],
                         fsync=files.deferred(h.store.core.fsync))  # fmt: skip
    assert done.stat().st_ino == inode  # the same inode, under the same name
    time.sleep(stamps.RACY_NS / 1e9 * 1.5)  # old enough that its stamp alone is trusted
    sweep_queue(h.store, HOST, QUEUE, KEEP, now=old_end + 1000)  # before the old retention
    assert not done.exists(), "retention followed the record it had learned, not the new one"


def test_the_sweep_keeps_the_pool_within_its_bound(h: Harness, monkeypatch) -> None:
    _round(h, 12, now=T0)
    assert len(_spare_inodes(h)) == 12
    monkeypatch.setattr(spares, "POOL_BOUND", 5)
    sweep_queue(h.store, HOST, QUEUE, KEEP, now=T0 + 100)
    assert len(_spare_inodes(h)) == 5


def test_retention_retires_into_the_spares(h: Harness) -> None:
    ids = _round(h, 4, now=T0)
    done = set(_inodes(h, "done").values())
    sweep_queue(h.store, HOST, QUEUE, KEEP, now=T0 + 3601 * 1000)
    assert not any((h.queue_dir / "done" / f"{t}.json").exists() for t in ids)
    assert done <= _spare_inodes(h)


def test_without_renameat2_the_store_writes_fresh_inodes(h: Harness, monkeypatch) -> None:
    """Where the C library has no renameat2 (another OS), a syncfs store's batches write fresh
    temps and unlink what they retire: no spare is ever made or taken."""
    monkeypatch.setattr(files, "_renameat2", None)
    # restored afterwards: the fallback notes it has made names by link() (creates_by_link)
    monkeypatch.setattr(files, "_links", files._links)
    ids = _round(h, 6, now=T0)
    assert _spare_inodes(h) == set()
    sweep_queue(h.store, HOST, QUEUE, KEEP, now=T0 + 3601 * 1000)
    assert _spare_inodes(h) == set()
    assert not any((h.queue_dir / "done" / f"{t}.json").exists() for t in ids)


def test_a_per_file_fsync_store_makes_no_spares(tmp_path: Path) -> None:
    h = Harness(tmp_path, fsync=True, flush="fsync")
    try:
        h.store.create_queue(HOST, QUEUE)
        _round(h, 6, now=T0)
        assert list((h.queue_dir / "spare").iterdir()) == []
    finally:
        h.close()


def test_a_spare_another_writer_holds_is_passed_by(h: Harness) -> None:
    _round(h, 2, now=T0)
    names = sorted(p.name for p in (h.queue_dir / "spare").iterdir())
    with h.store.queue_dirs(HOST, QUEUE) as qd:
        held = spares.take(qd, 1)
        try:
            others = spares.take(qd, 2)
            try:
                assert [n for _, n in others] == [n for n in names if n != held[0][1]]
            finally:
                for fd, _ in others:
                    os.close(fd)
        finally:
            for fd, _ in held:
                os.close(fd)


def test_a_lock_on_a_record_read_before_its_inode_came_back_written_over_is_refused(
    tmp_path: Path,
) -> None:
    """A reader opens and reads pending/X, then the inode is retired into the spares, written
    over and named pending/X again before the reader locks it: the name names the inode the
    reader holds, but not the record it read (files.lock_open compares the change time)."""
    pending, spare = tmp_path / "pending", tmp_path / "spare"
    pending.mkdir()
    spare.mkdir()
    (pending / "x.json").write_bytes(b'{"rev": 1}')
    dir_fd, spare_fd = os.open(pending, os.O_RDONLY), os.open(spare, os.O_RDONLY)
    try:
        fd, opened = files.open_regular(dir_fd, "x.json")
        try:
            assert files.read_fd(fd) == b'{"rev": 1}'
            time.sleep(0.02)  # a later tick of the file clock
            files.retire_into(dir_fd, "x.json", spare_fd, "s-1")
            again = files.open_spare(spare_fd, "s-1")
            assert again is not None
            files.rewrite(again, b'{"rev": 3}')
            os.close(again)
            files.rename_aside(spare_fd, "s-1", dir_fd, "x.json")
            assert os.stat("x.json", dir_fd=dir_fd).st_ino == opened.st_ino
            assert not files.lock_open(dir_fd, "x.json", fd, block=True, opened=opened)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
        os.close(spare_fd)


def test_a_spare_that_is_a_second_name_of_a_record_is_never_written_over(h: Harness) -> None:
    """A claim links the pending record into spare/ before it renames the leased record over
    it; a crash between the two leaves one inode under both names. A batch that took that
    spare would write another task's record into the claimed task's file."""
    [claimed_id] = [
        p.task.id
        for p in h.store.post_many(
            HOST, QUEUE, [PostEntry(item={"mine": 1})], settings=KEEP, posted_by="alice", now=T0
        )
    ]
    [claimed] = h.store.claim(HOST, QUEUE, settings=KEEP, worker=WORKER, now=T0 + 1)
    record = h.queue_dir / "processing" / f"{claimed_id}.json"
    before = record.read_bytes()
    for leftover in (h.queue_dir / "spare").iterdir():
        leftover.unlink()
    os.link(record, h.queue_dir / "spare" / "s-crashed-0")  # the crash's two names
    posted = h.store.post_many(HOST, QUEUE, [PostEntry(item={"other": i}) for i in range(3)],
                               settings=KEEP, posted_by="bob", now=T0 + 2)  # fmt: skip
    assert record.read_bytes() == before
    assert os.stat(record).st_nlink == 1  # the spare name went, the record stayed
    assert h.store.read(HOST, QUEUE, claimed.id).item == {"mine": 1}
    for p in posted:
        assert h.store.read(HOST, QUEUE, p.task.id).item["other"] in range(3)
