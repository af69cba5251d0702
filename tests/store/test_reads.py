"""files.read_at / read_fd read a whole task file, whatever its size: one read for a record
shorter than a read's size, as many as it takes for a longer one (a large item or result)."""

from __future__ import annotations

import os

import pytest

from queues.store import files

from .conftest import SETTINGS


@pytest.mark.parametrize("size", [0, 1, 300, 65535, 65536, 65537, 200_001])
def test_a_file_is_read_whole(tmp_path, size):
    data = bytes(i % 251 for i in range(size))
    (tmp_path / "t.json").write_bytes(data)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert files.read_at(fd, "t.json") == data
    finally:
        os.close(fd)


def test_a_task_whose_record_is_larger_than_one_read_goes_through_its_life(h):
    big = {"blob": "x" * (SETTINGS.max_item_bytes - 20)}  # the record passes 64 KiB
    task = h.post(big)
    assert (h.queue_dir / "pending" / f"{task.id}.json").stat().st_size > 65536
    claimed = h.claim()
    assert claimed.id == task.id and claimed.item == big
    ended = h.store.finish(
        "task.example.com", "resize", task.id, settings=SETTINGS, worker="box-1",
        attempt=claimed.attempts, result=big,
    ).task  # fmt: skip
    assert ended.result == big
    assert h.on_disk(task.id)["done"]["result"] == big
