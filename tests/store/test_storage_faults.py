"""Real storage faults under the logs directory: a full disk and a read-only file system.

The items live on the test's own directory; only the logs directory (day-files, the payload
archive) is a small tmpfs, filled up or remounted read-only (tests/store/mounts.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import orjson
import pytest

from queues.monitor.tail import LogTail
from queues.store import QueueSettings, QueueStore, StorageUnavailable, StoreConfig

from .conftest import HOST, QUEUE, T0
from .mounts import fill, small_fs

SETTINGS = QueueSettings()
ARCHIVING = QueueSettings(archive_payloads=True)


@pytest.fixture
def logs(tmp_path):
    with small_fs(tmp_path / "logs") as where:
        yield where


@pytest.fixture
def store(tmp_path, logs):
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    store.create_queue(HOST, QUEUE)
    yield store
    store.close()


def day_lines(logs: Path) -> list[bytes]:
    return [
        line for day in (logs / "tasks").glob("*.jsonl") for line in day.read_bytes().split(b"\n")
    ]


def test_a_line_cut_short_by_a_full_disk_never_swallows_the_next_one(store, logs):
    store.post(
        HOST, QUEUE, {"n": 0}, settings=SETTINGS, posted_by="alice", now=T0
    )  # the day-file exists
    filler = fill(logs)
    refused = 0
    for n in range(1, 40):  # a day-file page takes about a dozen lines: one of them is cut
        try:
            store.post(HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="alice", now=T0)
        except StorageUnavailable:
            refused += 1
    assert refused
    filler.unlink()  # space is back
    after = store.post(HOST, QUEUE, {"n": 99}, settings=SETTINGS, posted_by="alice", now=T0).task
    lines = [line for line in day_lines(logs) if line]
    records = [orjson.loads(line) for line in lines]  # every line whole: no fragment kept
    assert [r["id"] for r in records].count(after.id) == 1


GLUED = b'{"t":17'  # the head of a line a full disk cut short, and the next line after it


def test_the_event_stream_reads_a_line_glued_to_a_torn_fragment(tmp_path):
    day = dt.date(2025, 7, 1)
    tail = LogTail(tmp_path, today=lambda: day)
    line = orjson.dumps({"t": 1751328000, "host": HOST, "queue": QUEUE, "event": "posted"})
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "2025-07-01.jsonl").write_bytes(GLUED + b"\n" + GLUED + line + b"\n")
    assert [text for _, text in tail.read()] == [GLUED, line]  # the lone fragment: refused later
