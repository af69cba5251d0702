"""What the store creates is its owner's (and a group's to read), never everyone's: files
0640 and directories 0750 under the default umask 027, whatever the process's own umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from queues.store import QueueSettings, QueueStore, StoreConfig
from queues.store.settings import parse_umask

from .conftest import HOST, QUEUE, T0


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def wide_umask():
    """The process umask most systems start with: the store must not rely on a tighter one."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.mark.parametrize("umask,file_mode,dir_mode", [(None, 0o640, 0o750), (0o077, 0o600, 0o700)])
def test_task_files_day_files_and_archives_take_the_store_umask(
    tmp_path, wide_umask, umask, file_mode, dir_mode
):
    extra = {} if umask is None else {"umask": umask}
    config = StoreConfig(items_dir=tmp_path / "items", logs_dir=tmp_path / "logs", fsync=False,
                         **extra)  # fmt: skip
    store = QueueStore(config)
    store.create_queue(HOST, QUEUE)
    settings = QueueSettings(archive_payloads=True)
    task = store.post(HOST, QUEUE, {"n": 1}, settings=settings, posted_by="alice", now=T0).task
    queue_dir = config.items_dir / HOST / QUEUE
    assert mode(queue_dir / "pending" / f"{task.id}.json") == file_mode
    assert {mode(queue_dir / d) for d in ("pending", "processing", "done", "keys")} == {dir_mode}
    [day_file] = (config.logs_dir / "tasks").glob("*.jsonl")
    assert mode(day_file) == file_mode
    archive = config.logs_dir / "tasks-payloads" / HOST / QUEUE / task.id
    assert mode(archive / "item.json") == file_mode and mode(archive) == dir_mode
    store.close()


@pytest.mark.parametrize("text,umask", [("027", 0o027), ("0o077", 0o077), (" 0007 ", 0o007)])
def test_a_umask_is_read_in_octal(text, umask):
    assert parse_umask(text) == umask


@pytest.mark.parametrize("text", ["", "abc", "9", "0o1777", "0700", "0o200", "-1"])
def test_a_bad_umask_is_refused_with_its_reason(text):
    with pytest.raises(ValueError, match="umask"):
        parse_umask(text)
