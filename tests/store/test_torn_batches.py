"""A full logs disk cuts a batch's event lines short in the middle of the batch.

The lines the disk took whole may have been read already (Task Logs files each line by its
day-file and offset, the live stream sends it), so they stand: a line at an offset never
changes, and the change each one tells of stands with it. Found by the soak: a claim's whole
`claimed` line was cut back with the rest of its batch, the next line landed at its offset, and
Task Logs, which had read the `claimed` line there, never stored the task's ending.

Real faults: the logs (and, where said, the items) are a small tmpfs (tests/store/mounts.py)
whose day-file is left room for one and a half lines."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from queues.store import PostEntry, QueueSettings, QueueStore, StorageUnavailable, StoreConfig

from .conftest import HOST, QUEUE, T0
from .mounts import fill, small_fs

SETTINGS = QueueSettings()


@pytest.fixture
def logs(tmp_path):
    with small_fs(tmp_path / "logs") as where:
        yield where


def _store(items: Path, logs: Path) -> QueueStore:
    store = QueueStore(StoreConfig(items_dir=items, logs_dir=logs, fsync=False))
    store.create_queue(HOST, QUEUE)
    return store


def _day_file(logs: Path) -> Path:
    [day_file] = (logs / "tasks").glob("*.jsonl")
    return day_file


def _last_line_size(logs: Path) -> int:
    return len(_day_file(logs).read_bytes().splitlines()[-1]) + 1


def _room_in_the_day_file(logs: Path, room: int) -> Path:
    """Fill the file system, then leave the day-file `room` bytes in its last page (a
    tmpfs page that a file has is its own): the next append is cut short past them."""
    filler = fill(logs)
    day_file = _day_file(logs)
    with open(day_file, "ab", buffering=0) as pad, pytest.raises(OSError):
        while True:
            pad.write(b"\n" * 64)
    size = day_file.stat().st_size
    pad_end = size - size % 4096 or size
    os.truncate(day_file, pad_end - room)
    return filler


def _whole_lines(data: bytes) -> bytes:
    return data[: data.rfind(b"\n") + 1]


def _events(logs: Path) -> list[dict]:
    return [orjson.loads(line) for line in _day_file(logs).read_bytes().splitlines() if line]


def _ids(directory: Path) -> set[str]:
    return {p.name.split(".")[0] for p in directory.iterdir()}


def test_a_claim_cut_short_keeps_the_claims_whose_lines_the_disk_took(tmp_path, logs):
    items = tmp_path / "items"
    store = _store(items, logs)
    posted = [
        store.post(HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="alice", now=T0).task
        for n in range(4)
    ]
    [first] = store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", now=T0 + 1)
    line = _last_line_size(logs)  # a `claimed` line of this queue
    filler = _room_in_the_day_file(logs, line + line // 2)
    with pytest.raises(StorageUnavailable):
        store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", max_tasks=3, now=T0 + 2)
    read_then = _whole_lines(_day_file(logs).read_bytes())  # what a reader could have read
    claimed_then = [e for e in _events(logs) if e["event"] == "claimed" and e["id"] != first.id]
    assert len(claimed_then) == 1  # the disk took one line whole, and cut the next
    [standing] = claimed_then
    queue_dir = items / HOST / QUEUE
    # the claim whose line stands is leased; the two others went back, claimable
    assert _ids(queue_dir / "processing") == {first.id, standing["id"]}
    back = {t.id for t in posted} - {first.id, standing["id"]}
    assert _ids(queue_dir / "pending") == back
    filler.unlink()
    again = store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-2", max_tasks=3, now=T0 + 3)
    assert {t.id for t in again} == back and {t.attempts for t in again} == {1}
    store.finish(HOST, QUEUE, again[0].id, settings=SETTINGS, worker="box-2", attempt=1,
                 result={"ok": True}, now=T0 + 4)  # fmt: skip
    # no line a reader read was ever taken back or written over
    assert _day_file(logs).read_bytes().startswith(read_then)
    store.close()


def test_a_batch_post_cut_short_spools_only_the_lines_the_disk_did_not_take(tmp_path, logs):
    items = tmp_path / "items"
    store = _store(items, logs)
    store.post(HOST, QUEUE, {"n": -1}, settings=SETTINGS, posted_by="alice", now=T0)
    line = _last_line_size(logs)
    filler = _room_in_the_day_file(logs, line + line // 2)
    results = store.post_many(
        HOST, QUEUE, [PostEntry(item={"n": n}) for n in range(4)], settings=SETTINGS,
        posted_by="alice", now=T0 + 1,
    )  # fmt: skip
    read_then = _whole_lines(_day_file(logs).read_bytes())
    batch = {r.task.id for r in results}
    # the disk took one of the batch's lines whole: it stands where a reader may have read it
    assert len([e for e in _events(logs) if e["id"] in batch]) == 1
    filler.unlink()
    store.post(HOST, QUEUE, {"n": 99}, settings=SETTINGS, posted_by="alice", now=T0 + 2)
    assert _day_file(logs).read_bytes().startswith(read_then)
    ids = [e["id"] for e in _events(logs) if e["event"] == "posted"]
    assert all(ids.count(r.task.id) == 1 for r in results)  # each post's line once, none twice
    store.close()


def test_a_batch_post_both_disks_refuse_keeps_the_tasks_whose_lines_stand(tmp_path, logs):
    with small_fs(tmp_path / "items", size="1m") as items:
        store = _store(items, logs)
        store.post(HOST, QUEUE, {"n": -1}, settings=SETTINGS, posted_by="alice", now=T0)
        line = _last_line_size(logs)
        filler = _room_in_the_day_file(logs, line + line // 2)
        # the items disk: room for the batch's task files, none for a spool file after them
        items_filler = fill(items)
        os.truncate(items_filler, items_filler.stat().st_size - 3 * 4096)
        with pytest.raises(StorageUnavailable):
            store.post_many(
                HOST, QUEUE, [PostEntry(item={"n": n}) for n in range(3)], settings=SETTINGS,
                posted_by="alice", now=T0 + 1,
            )  # fmt: skip
        posted_lines = {e["id"] for e in _events(logs) if e["event"] == "posted"}
        pending = _ids(items / HOST / QUEUE / "pending")
        assert len(posted_lines) == 2  # the first post's, and one of the batch taken whole
        assert pending == posted_lines  # that task stands; the two cut off were withdrawn
        filler.unlink()
        items_filler.unlink()
        store.close()
