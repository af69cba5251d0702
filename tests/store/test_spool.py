"""A change whose event line the logs disk refuses is acknowledged, its line spooled on the
items disk and appended once the logs disk takes it again (queues/store/spool.py, issue 21).

Real faults only: the logs directory is a small tmpfs filled to ENOSPC; for "both disks
refuse", the spool directory is a tmpfs of its own remounted read-only (tests/store/mounts.py).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from queues.store import (
    PostEntry,
    QueueSettings,
    QueueStore,
    Report,
    StorageUnavailable,
    StoreConfig,
    sweep_all,
)
from queues.store.spool import SPOOL_DIR

from .conftest import HOST, QUEUE, T0
from .mounts import fill, read_only, small_fs

SETTINGS = QueueSettings()


@pytest.fixture
def logs(tmp_path):
    with small_fs(tmp_path / "logs") as where:
        yield where


def open_store(tmp_path: Path, logs: Path) -> QueueStore:
    return QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))


@pytest.fixture
def store(tmp_path, logs):
    store = open_store(tmp_path, logs)
    store.create_queue(HOST, QUEUE)
    yield store
    store.close()


def fill_logs(logs: Path) -> Path:
    """No byte left on the logs disk, the day-file's last page included; returns the filler."""
    filler = fill(logs)
    for day_file in (logs / "tasks").glob("*.jsonl"):
        with open(day_file, "ab", buffering=0) as pad, pytest.raises(OSError):
            while True:
                pad.write(b"\n")  # an empty line: readers pass over it
    return filler


def lines(logs: Path) -> list[dict]:
    return [
        orjson.loads(line)
        for day in sorted((logs / "tasks").glob("*.jsonl"))
        for line in day.read_bytes().split(b"\n")
        if line
    ]


def events_of(logs: Path, task_id: str) -> list[str]:
    return [line["event"] for line in lines(logs) if line["id"] == task_id]


def spooled(tmp_path: Path) -> list[str]:
    spool = tmp_path / "items" / SPOOL_DIR
    return sorted(p.name for p in spool.iterdir()) if spool.is_dir() else []


def pending_names(tmp_path: Path) -> list[str]:
    pending = tmp_path / "items" / HOST / QUEUE / "pending"
    return sorted(p.name for p in pending.iterdir() if p.name.endswith(".json"))


def post(store: QueueStore, n: int, **kwargs) -> str:
    return store.post(
        HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="alice", now=T0, **kwargs
    ).task.id


def test_changes_on_a_full_logs_disk_are_acknowledged_and_logged_once_space_returns(
    tmp_path, store, logs
):
    ids = [post(store, n) for n in range(6)]
    claimed = store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", max_tasks=5,
                          now=T0 + 1000)  # fmt: skip
    by_id = {t.id: t for t in claimed}
    first, second, third, fourth, _ = (by_id[i] for i in ids[:5])
    filler = fill_logs(logs)
    # every verb below is acknowledged although no line of it can be appended now
    store.finish(HOST, QUEUE, first.id, settings=SETTINGS, worker="box-1",
                 attempt=first.attempts, result={"ok": 1}, now=T0 + 2000)  # fmt: skip
    store.fail(HOST, QUEUE, second.id, settings=SETTINGS, worker="box-1",
               attempt=second.attempts, result={"no": 1}, now=T0 + 2000)  # fmt: skip
    answers = store.finish_many(
        HOST, QUEUE,
        [Report(task_id=third.id, attempt=third.attempts, outcome="result", result={"ok": 3}),
         Report(task_id=fourth.id, attempt=fourth.attempts, outcome="fail", result={"no": 4})],
        settings=SETTINGS, worker="box-1", now=T0 + 2000,
    )  # fmt: skip
    assert not [a for a in answers if isinstance(a, Exception)]
    store.cancel(HOST, QUEUE, ids[5], settings=SETTINGS, now=T0 + 2000, by="bob")
    late = post(store, 7)
    batch = [
        r.task.id
        for r in store.post_many(HOST, QUEUE, [PostEntry(item={"n": 8}), PostEntry(item={"n": 9})],
                                 settings=SETTINGS, posted_by="alice", now=T0 + 2000)
    ]  # fmt: skip
    assert len(spooled(tmp_path)) == 6  # one spool file per append (a batch: one)
    filler.unlink()  # space is back
    report = sweep_all(store, lambda host, queue: SETTINGS, now=T0 + 3000)
    assert not report.errors
    assert spooled(tmp_path) == []
    assert events_of(logs, first.id) == ["posted", "claimed", "result"]
    assert events_of(logs, second.id) == ["posted", "claimed", "failed"]
    assert events_of(logs, third.id) == ["posted", "claimed", "result"]
    assert events_of(logs, fourth.id) == ["posted", "claimed", "failed"]
    assert events_of(logs, ids[5]) == ["posted", "cancelled"]
    for task_id in [late, *batch]:
        assert events_of(logs, task_id) == ["posted"]
    # the spooled lines are the change's own: stamped when it happened, not when drained
    assert {line["t"] for line in lines(logs) if line["event"] == "result"} == {(T0 + 2000) // 1000}


def test_a_restarted_process_appends_what_an_earlier_one_spooled(tmp_path, store, logs):
    post(store, 0)  # the day-file exists
    filler = fill_logs(logs)
    spooled_ids = [post(store, n) for n in range(1, 4)]
    assert len(spooled(tmp_path)) == 3
    store.close()
    filler.unlink()
    again = open_store(tmp_path, logs)
    try:
        after = post(again, 9)  # its first append drains the spool before its own line
    finally:
        again.close()
    assert spooled(tmp_path) == []
    posted = [line["id"] for line in lines(logs) if line["event"] == "posted"]
    assert posted[1:] == [*spooled_ids, after]  # each exactly once, in spooling order


def test_a_done_task_whose_line_is_spooled_is_not_cleaned_before_the_line_is_written(
    tmp_path, store, logs
):
    task_id = post(store, 0)
    [task] = store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", now=T0 + 1000)
    filler = fill_logs(logs)
    store.finish(HOST, QUEUE, task_id, settings=SETTINGS, worker="box-1",
                 attempt=task.attempts, result={}, now=T0 + 2000)  # fmt: skip
    over = T0 + 2000 + SETTINGS.retain_seconds * 1000 + 1000  # its retention is over
    report = sweep_all(store, lambda host, queue: SETTINGS, now=over)
    assert report.errors  # the queue's clean is refused while its line waits in the spool
    assert store.read(HOST, QUEUE, task_id).id == task_id
    filler.unlink()
    report = sweep_all(store, lambda host, queue: SETTINGS, now=over)
    assert not report.errors
    assert events_of(logs, task_id) == ["posted", "claimed", "result", "cleaned"]


@pytest.fixture
def no_spool(tmp_path, store):
    """The spool directory on a read-only disk of its own: the items disk refuses it too."""
    with small_fs(tmp_path / "items" / SPOOL_DIR) as where:
        read_only(where)
        yield where


def test_a_post_that_neither_disk_can_log_answers_503_and_leaves_no_task(
    tmp_path, store, logs, no_spool
):
    post(store, 0)
    fill_logs(logs)
    before = pending_names(tmp_path)
    with pytest.raises(StorageUnavailable):
        post(store, 1)
    with pytest.raises(StorageUnavailable):
        post(store, 2, idempotency_key="k-2")
    with pytest.raises(StorageUnavailable):
        store.post_many(HOST, QUEUE, [PostEntry(item={"n": 3}), PostEntry(item={"n": 4})],
                        settings=SETTINGS, posted_by="alice", now=T0)  # fmt: skip
    assert pending_names(tmp_path) == before  # nothing of the refused posts stands
    assert list((tmp_path / "items" / HOST / QUEUE / "keys").iterdir()) == []
    assert store.state_counts(HOST, QUEUE, now=T0).pending == len(before)


def test_a_drain_that_died_midway_neither_repeats_nor_loses_its_lines(tmp_path, store, logs):
    post(store, 0)  # the day-file exists
    filler = fill_logs(logs)
    appended, not_yet = post(store, 1), post(store, 2)
    filler.unlink()
    first, second = sorted((tmp_path / "items" / SPOOL_DIR).iterdir())
    # what a drainer killed after appending the first file, before its unlink, leaves behind
    [day_file] = (logs / "tasks").glob("*.jsonl")
    with open(day_file, "ab") as day:
        day.write(first.read_bytes())
    first.rename(first.with_suffix(".draining"))
    # and one killed after renaming the second, before appending it
    second.rename(second.with_suffix(".draining"))
    report = sweep_all(store, lambda host, queue: SETTINGS, now=T0 + 1000)
    assert not report.errors
    assert spooled(tmp_path) == []
    assert events_of(logs, appended) == ["posted"]  # once, not again
    assert events_of(logs, not_yet) == ["posted"]  # once, not lost


def test_an_append_drains_a_long_spool_a_few_files_at_a_time_in_order(tmp_path, store, logs):
    post(store, 0)  # the day-file exists
    filler = fill_logs(logs)
    spooled_ids = [post(store, n) for n in range(1, 41)]
    filler.unlink()
    first_after = post(store, 41)  # drains 32 files before its own line
    assert len(spooled(tmp_path)) == 8
    second_after = post(store, 42)  # and the rest
    assert spooled(tmp_path) == []
    posted = [line["id"] for line in lines(logs) if line["event"] == "posted"]
    assert posted[1:] == [*spooled_ids[:32], first_after, *spooled_ids[32:], second_after]


def test_a_post_withdrawn_after_a_claim_took_its_task_stands(tmp_path, store):
    from queues.store import posting

    task = store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="alice", now=T0).task
    queue_dir = tmp_path / "items" / HOST / QUEUE
    # what a claim does first: the no-replace rename out of pending/
    (queue_dir / "pending" / f"{task.id}.json").rename(queue_dir / "processing" / f"{task.id}.json")
    with store.queue_dirs(HOST, QUEUE) as qd:
        assert posting.withdraw_task(qd, task, fsync=False) is False  # the post happened
    assert [p.name for p in (queue_dir / "processing").iterdir()] == [f"{task.id}.json"]


def test_a_post_whose_withdrawal_the_items_disk_refuses_keeps_its_task_and_answers_503(tmp_path):
    from queues.store import posting

    with small_fs(tmp_path / "items", size="1m") as items:
        store = QueueStore(StoreConfig(items_dir=items, logs_dir=tmp_path / "logs", fsync=False))
        try:
            store.create_queue(HOST, QUEUE)
            task = store.post(HOST, QUEUE, {}, settings=SETTINGS, posted_by="a", now=T0).task
            read_only(items)
            with store.queue_dirs(HOST, QUEUE) as qd:
                assert posting.withdraw_task(qd, task, fsync=False) is True  # the 503 stands
            assert (items / HOST / QUEUE / "pending" / f"{task.id}.json").is_file()
        finally:
            store.close()


def test_a_drain_the_full_disk_refuses_leaves_its_file_as_spooled(tmp_path, store, logs):
    post(store, 0)  # the day-file exists
    fill_logs(logs)
    post(store, 1)
    post(store, 2)  # its append tries the drain first, and the disk refuses it
    names = spooled(tmp_path)
    # none is left `.draining`, which only a dead drainer leaves (and a drain must search for)
    assert len(names) == 2 and all(name.endswith(".jsonl") for name in names)
