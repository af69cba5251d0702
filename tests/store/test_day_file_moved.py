"""The event log writes to the file its day-file's path names now: a day-file moved away or
deleted, or a logs disk mounted again after it failed, takes no line where nobody reads it."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from queues.store import QueueSettings, QueueStore, StorageUnavailable, StoreConfig, sweep_all

from .conftest import HOST, QUEUE
from .mounts import ext4_fs, fail_ext4, mount_again, mount_image, unmount

SETTINGS = QueueSettings()


def open_store(tmp_path: Path, logs: Path) -> QueueStore:
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=True))
    store.create_queue(HOST, QUEUE)
    return store


def post(store: QueueStore, n: int) -> str:
    return store.post(HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="alice").task.id


def ids_in(day_file: Path) -> list[str]:
    return [orjson.loads(line)["id"] for line in day_file.read_bytes().splitlines() if line]


def test_a_day_file_moved_away_is_made_again_for_the_next_line(tmp_path):
    store = open_store(tmp_path, tmp_path / "logs")
    first = post(store, 1)
    [day_file] = (tmp_path / "logs" / "tasks").glob("*.jsonl")
    moved = day_file.with_name(day_file.name + ".1")
    os.rename(day_file, moved)  # a rotation by hand
    second = post(store, 2)
    assert ids_in(moved) == [first] and ids_in(day_file) == [second]
    day_file.unlink()  # deleted by hand
    third = post(store, 3)
    assert ids_in(day_file) == [third]
    store.close()


def test_lines_refused_by_a_failed_logs_disk_reach_it_once_it_is_mounted_again(tmp_path):
    image = tmp_path / "logs.img"
    with ext4_fs(tmp_path / "logs", image) as logs:
        store = open_store(tmp_path, logs)
        before = post(store, 1)
        fail_ext4(logs)
        during = post(store, 2)  # its line is refused: spooled on the items disk
        mount_again(logs, image)
        after = post(store, 3)
        report = sweep_all(store, lambda host, queue: SETTINGS)  # drains the spool
        assert not report.errors, report.errors
        [day_file] = (logs / "tasks").glob("*.jsonl")
        assert sorted(ids_in(day_file)) == sorted([before, during, after])
        store.close()


def test_lines_written_while_the_logs_disk_is_unmounted_wait_for_it_not_under_it(tmp_path):
    """Between an unmount and the next mount the logs path is the empty mount point: a line is
    spooled, not written there (where the disk, mounted again, would hide it)."""
    image = tmp_path / "logs.img"
    with ext4_fs(tmp_path / "logs", image) as logs:
        store = open_store(tmp_path, logs)
        before = post(store, 1)
        unmount(logs)
        during = post(store, 2)
        assert list(logs.iterdir()) == []  # nothing made on the disk under the mount point
        mount_image(logs, image)
        report = sweep_all(store, lambda host, queue: SETTINGS)  # drains the spool
        assert not report.errors, report.errors
        [day_file] = (logs / "tasks").glob("*.jsonl")
        assert sorted(ids_in(day_file)) == sorted([before, during])
        store.close()


def test_a_line_whose_flush_failed_but_which_the_disk_kept_is_in_the_day_file_once(tmp_path):
    """A flush can fail after the disk took the line (EIO from a disk failing as it wrote):
    the line is spooled as one that may be written, and its drain finds it in the day-file
    and does not append it again."""
    import errno

    from queues.store import files

    store = open_store(tmp_path, tmp_path / "logs")
    first = post(store, 1)
    files.FAULTS.reset()
    # the post's flushes: its record's, then (after the record's directory) its line's
    files.FAULTS.fail_kind, files.FAULTS.fail_at, files.FAULTS.fail_errno = "fsync", 2, errno.EIO
    try:
        second = post(store, 2)  # acknowledged: its record is durable, its line spooled
    finally:
        files.FAULTS.reset()
    [day_file] = (tmp_path / "logs" / "tasks").glob("*.jsonl")
    assert ids_in(day_file) == [first, second]  # the page cache had it: so did the disk
    report = sweep_all(store, lambda host, queue: SETTINGS)  # drains the spool
    assert not report.errors, report.errors
    assert ids_in(day_file) == [first, second]
    assert list((tmp_path / "items" / ".unlogged").iterdir()) == []
    store.close()


def test_a_line_whose_flush_failed_is_not_taken_as_written_while_the_disk_is_failed(tmp_path):
    """A failed disk still shows what it had in memory, and loses it once checked and mounted
    again: the drain does not decide while it is read-only, and appends the line after."""
    import errno

    from queues.store import files

    image = tmp_path / "logs.img"
    with ext4_fs(tmp_path / "logs", image) as logs:
        store = open_store(tmp_path, logs)
        first = post(store, 1)
        files.FAULTS.reset()
        files.FAULTS.fail_kind, files.FAULTS.fail_at = "fsync", 2
        files.FAULTS.fail_errno = errno.EIO
        try:
            second = post(store, 2)  # its line in the page cache only, and spooled
        finally:
            files.FAULTS.reset()
        fail_ext4(logs)
        [day_file] = (logs / "tasks").glob("*.jsonl")
        assert ids_in(day_file) == [first, second]  # shown, not kept
        sweep_all(store, lambda host, queue: SETTINGS)  # its drain must not decide now
        mount_again(logs, image)
        report = sweep_all(store, lambda host, queue: SETTINGS)
        assert not report.errors, report.errors
        assert ids_in(day_file) == [first, second]
        store.close()


def test_a_sweep_while_the_logs_disk_is_unmounted_goes_on(tmp_path):
    """Its mount point empty, the logs disk has no tasks/: the pass prunes nothing, drains
    nothing, and ends; once the disk is back the next pass drains what was spooled."""
    image = tmp_path / "logs.img"
    with ext4_fs(tmp_path / "logs", image) as logs:
        store = open_store(tmp_path, logs)
        first = post(store, 1)
        unmount(logs)
        second = post(store, 2)  # spooled
        report = sweep_all(store, lambda host, queue: SETTINGS, now=None)
        assert report.logs_pruned == 0
        assert list(logs.iterdir()) == []
        mount_image(logs, image)
        sweep_all(store, lambda host, queue: SETTINGS)
        [day_file] = (logs / "tasks").glob("*.jsonl")
        assert ids_in(day_file) == [first, second]
        store.close()


def test_the_archive_refuses_a_post_once_its_folder_went_and_makes_none(tmp_path):
    """tasks-payloads/ seen, then gone (the logs disk unmounted): a post that archives its item
    is refused (503), and no tasks-payloads/ is made where the disk was."""
    archiving = QueueSettings(archive_payloads=True)
    store = open_store(tmp_path, tmp_path / "logs")
    store.post(HOST, QUEUE, {"n": 1}, settings=archiving, posted_by="alice")
    payloads = tmp_path / "logs" / "tasks-payloads"
    away = tmp_path / "payloads-away"
    os.rename(payloads, away)
    with pytest.raises(StorageUnavailable):
        store.post(HOST, QUEUE, {"n": 2}, settings=archiving, posted_by="alice")
    assert not payloads.exists()
    os.rename(away, payloads)  # back: archiving goes on
    store.post(HOST, QUEUE, {"n": 3}, settings=archiving, posted_by="alice")
    store.close()
