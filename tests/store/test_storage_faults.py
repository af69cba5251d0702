"""Real storage faults under the logs directory: a full disk and a read-only file system.

The items live on the test's own directory; only the logs directory (day-files, the payload
archive) is a small tmpfs, filled up or remounted read-only (tests/store/mounts.py)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from queues.monitor.tail import LogTail
from queues.store import (
    PostEntry,
    QueueSettings,
    QueueStore,
    StorageUnavailable,
    StoreConfig,
    files,
    sweep_all,
    sweep_queue,
)
from queues.store.batch import OnComplete
from tests.migrated import migrate

from ..children import interrupted, reaped
from .conftest import HOST, QUEUE, T0
from .mounts import fill, read_only, small_fs, writable

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
    # a day-file page takes about a dozen lines: one of them is cut, and spooled whole
    spooled = [
        store.post(HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="alice", now=T0).task.id
        for n in range(1, 40)
    ]
    filler.unlink()  # space is back
    after = store.post(HOST, QUEUE, {"n": 99}, settings=SETTINGS, posted_by="alice", now=T0).task
    lines = [line for line in day_lines(logs) if line]
    records = [orjson.loads(line) for line in lines]  # every line whole: no fragment kept
    ids = [r["id"] for r in records]
    assert ids.count(after.id) == 1
    assert all(ids.count(task_id) == 1 for task_id in spooled)  # each post's line, once


GLUED = b'{"t":17'  # the head of a line a full disk cut short, and the next line after it


def test_the_event_stream_reads_a_line_glued_to_a_torn_fragment(tmp_path):
    day = dt.date(2025, 7, 1)
    tail = LogTail(tmp_path, today=lambda: day)
    line = orjson.dumps({"t": 1751328000, "host": HOST, "queue": QUEUE, "event": "posted"})
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "2025-07-01.jsonl").write_bytes(GLUED + b"\n" + GLUED + line + b"\n")
    assert [text for _, text in tail.read()] == [GLUED, line]  # the lone fragment: refused later


def _pending_record(items: Path, task_id: str) -> dict:
    return orjson.loads((items / HOST / QUEUE / "pending" / f"{task_id}.json").read_bytes())


def _claim(store: QueueStore) -> list:
    return store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", now=T0 + 1000)


@pytest.mark.parametrize("max_tasks", [1, 3])
def test_a_claim_whose_line_a_read_only_log_refuses_leaves_its_tasks_claimable(
    tmp_path, store, logs, max_tasks
):
    posted = [
        store.post(HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="alice", now=T0).task
        for n in range(max_tasks)
    ]
    before = {t.id: _pending_record(tmp_path / "items", t.id) for t in posted}
    store.close()  # its day-file descriptor open for writing would refuse the remount
    read_only(logs)
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    with pytest.raises(StorageUnavailable):
        store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", max_tasks=max_tasks,
                    now=T0 + 1000)  # fmt: skip
    # every task is back in pending/ exactly as it was: no lease, still pending, same rev
    assert {i: _pending_record(tmp_path / "items", i) for i in before} == before
    assert list((tmp_path / "items" / HOST / QUEUE / "processing").iterdir()) == []
    store.close()  # and a restart: nothing of the failed claim is kept in memory either
    writable(logs)
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    claimed = store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", max_tasks=max_tasks,
                          now=T0 + 2000)  # fmt: skip
    assert sorted(t.id for t in claimed) == sorted(before)
    assert {t.attempts for t in claimed} == {1}
    store.close()


def test_a_claim_whose_line_a_full_log_disk_refuses_leaves_its_task_claimable(
    tmp_path, store, logs
):
    task = store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="alice", now=T0).task
    before = _pending_record(tmp_path / "items", task.id)
    filler = fill(logs)
    [day_file] = (logs / "tasks").glob("*.jsonl")
    # the day-file's last page too
    with open(day_file, "ab", buffering=0) as pad, pytest.raises(OSError):
        while True:
            pad.write(b"\n")
    with pytest.raises(StorageUnavailable):
        _claim(store)
    assert _pending_record(tmp_path / "items", task.id) == before
    filler.unlink()
    [claimed] = _claim(store)
    assert claimed.id == task.id and claimed.attempts == 1


def _planted(tmp_path: Path, directory: str, task: dict) -> None:
    (tmp_path / "items" / HOST / QUEUE / directory / f"{task['id']}.json").write_bytes(
        orjson.dumps(task)
    )


@pytest.mark.parametrize(
    "directory,lease",
    [("processing", None), ("pending", {"worker": "box-1", "until": T0 + 3_600_000})],
    ids=["processing-without-a-lease", "pending-with-a-lease"],
)
def test_the_lease_pass_requeues_a_stranded_leased_record(tmp_path, store, directory, lease):
    """A record in processing/ whose lease is null, and a leased one that a failed claim of an
    older version carried back into pending/: neither claimable nor lapsing until now."""
    task = store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="alice", now=T0).task
    (tmp_path / "items" / HOST / QUEUE / "pending" / f"{task.id}.json").unlink()
    record = {**task.to_record(), "status": "processing", "attempts": 1, "lease": lease,
              "rev": task.rev + 1}  # fmt: skip
    _planted(tmp_path, directory, record)
    report = sweep_queue(store, HOST, QUEUE, SETTINGS, now=T0 + 2000)
    assert report.requeue == 1
    [claimed] = _claim(store)
    assert claimed.id == task.id


def test_a_post_to_an_archiving_queue_on_a_read_only_log_answers_503_and_posts_nothing(
    tmp_path, store, logs
):
    store.close()
    read_only(logs)
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    with pytest.raises(StorageUnavailable):
        store.post(HOST, QUEUE, {"n": 1}, settings=ARCHIVING, posted_by="alice", now=T0)
    queue_dir = tmp_path / "items" / HOST / QUEUE
    assert [p for d in ("pending", "processing", "done") for p in (queue_dir / d).iterdir()] == []
    store.close()
    writable(logs)


def test_a_keyed_post_refused_by_a_read_only_archive_leaves_no_key_and_its_retry_posts_anew(
    tmp_path, store, logs
):
    store.close()
    read_only(logs)
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    with pytest.raises(StorageUnavailable):
        store.post(HOST, QUEUE, {"n": 1}, settings=ARCHIVING, posted_by="alice", now=T0,
                   idempotency_key="k-1")  # fmt: skip
    with pytest.raises(StorageUnavailable):
        store.post_many(HOST, QUEUE, [PostEntry(item={"n": 2}, idempotency_key="k-2")],
                        settings=ARCHIVING, posted_by="alice", now=T0)  # fmt: skip
    queue_dir = tmp_path / "items" / HOST / QUEUE
    assert list((queue_dir / "keys").iterdir()) == []  # a 503 post leaves no task, no key
    store.close()
    writable(logs)
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    again = store.post(HOST, QUEUE, {"n": 1}, settings=ARCHIVING, posted_by="alice",
                       now=T0 + 10, idempotency_key="k-1")  # fmt: skip
    [batch] = store.post_many(HOST, QUEUE, [PostEntry(item={"n": 2}, idempotency_key="k-2")],
                              settings=ARCHIVING, posted_by="alice", now=T0 + 10)  # fmt: skip
    for posted in (again, batch):
        assert not posted.replayed  # a new post: its line and its archive are its own
        assert posted.task.posted_at == T0 + 10
        lines = [orjson.loads(line) for line in day_lines(logs) if line]
        assert [line["event"] for line in lines if line["id"] == posted.task.id] == ["posted"]
        folder = logs / "tasks-payloads" / HOST / QUEUE / posted.task.id
        assert (folder / "item.json").is_file()
    store.close()


def test_a_closing_post_refused_by_a_read_only_archive_leaves_its_group_open(tmp_path, store, logs):
    member = store.post(HOST, QUEUE, {"n": 1}, settings=ARCHIVING, posted_by="alice", now=T0,
                        group="night").task  # fmt: skip
    store.close()
    read_only(logs)
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    closing = OnComplete(queue="reports", item={"r": 1}, settings=SETTINGS)
    with pytest.raises(StorageUnavailable):
        store.post(HOST, QUEUE, {"n": 2}, settings=ARCHIVING, posted_by="alice", now=T0 + 1,
                   group="night", on_complete=closing)  # fmt: skip
    view = store.read_group(HOST, QUEUE, "night").view()
    assert view["state"] == "open" and view["posted"] == 1
    store.sweep_queue(HOST, QUEUE, ARCHIVING, now=T0 + 120_000)  # past a gone member's minute
    assert store.read_group(HOST, QUEUE, "night").view()["state"] == "open"
    assert not (tmp_path / "items" / HOST / "reports").exists()  # no callback was posted
    store.close()
    writable(logs)
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    again = store.post(HOST, QUEUE, {"n": 2}, settings=ARCHIVING, posted_by="alice",
                       now=T0 + 200_000, group="night", on_complete=closing).task  # fmt: skip
    view = store.read_group(HOST, QUEUE, "night").view()
    assert view["state"] == "closed" and view["posted"] == 2
    for task in (member, again):
        [claimed] = store.claim(HOST, QUEUE, settings=ARCHIVING, worker="w", now=T0 + 200_001)
        store.finish(HOST, QUEUE, claimed.id, result={}, settings=ARCHIVING, worker="w",
                     attempt=1, now=T0 + 200_002)  # fmt: skip
    [callback] = store.list_tasks(HOST, "reports").tasks
    assert callback.item["group"]["total"] == 2
    store.close()


def test_a_store_on_a_read_only_log_without_its_tasks_folder_spools_its_lines(tmp_path, logs):
    read_only(logs)  # before anything made logs/tasks/
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    store.create_queue(HOST, QUEUE)
    store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="alice", now=T0)
    assert store.list_tasks(HOST, QUEUE).count == 1  # posted, its line spooled on the items disk
    assert len(list((tmp_path / "items" / ".unlogged").iterdir())) == 1
    store.close()
    writable(logs)


def test_a_claim_moves_another_tenants_record_aside_even_when_it_cannot_log_it(tmp_path, logs):
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    store.create_queue(HOST, QUEUE)
    planted = store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="alice", now=T0).task
    store.close()
    _planted(tmp_path, "pending", {**planted.to_record(), "host": "other.example.com"})
    read_only(logs)
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=logs, fsync=False))
    assert _claim(store) == []  # nothing to claim: not a 503
    assert [
        p.name.split(".")[0] for p in (tmp_path / "items" / HOST / QUEUE / "quarantine").iterdir()
    ] == [planted.id]
    store.close()
    writable(logs)


# The sweep on a disk that refuses (issue 21): one line for the pass, never a traceback, and the
# next pass does what this one could not.

LAPSED = SETTINGS  # a 30 s lease claimed at T0 has lapsed by T0 + LATER
LATER = 7_200_000  # and a retention of an hour is over


@pytest.fixture
def items(tmp_path):
    with small_fs(tmp_path / "items", size="1m") as where:
        yield where


def _with_a_lapsed_lease(items: Path, logs: Path, *, leased: int = 1, done: int = 0) -> list[str]:
    """`leased` tasks whose lease lapses by T0 + LATER, then `done` finished tasks whose
    retention is over by then; the done ones sort last, so a pass meets them last."""
    store = QueueStore(StoreConfig(items_dir=items, logs_dir=logs, fsync=False))
    store.create_queue(HOST, QUEUE)
    for n in range(leased + done):
        store.post(HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="alice", now=T0)
    ids = sorted(t.id for t in store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1",
                                           max_tasks=leased + done, now=T0))  # fmt: skip
    for task_id in ids[leased:]:
        store.finish(HOST, QUEUE, task_id, settings=SETTINGS, worker="box-1", attempt=1,
                     result={"ok": True}, now=T0)  # fmt: skip
    sweep_all(store, lambda host, queue: SETTINGS, now=T0)  # makes its lock file
    store.close()  # its open day-file would refuse the remount
    return ids


def _sweep(items: Path, logs: Path, caplog) -> tuple[list[str], int]:
    """One pass of a fresh store (a restarted sweep loop): its errors and its requeues."""
    store = QueueStore(StoreConfig(items_dir=items, logs_dir=logs, fsync=False))
    try:
        with caplog.at_level(logging.DEBUG, logger="taskhoster"):
            report = sweep_all(store, lambda host, queue: LAPSED, now=T0 + LATER)
    finally:
        store.close()
    assert [r for r in caplog.records if r.exc_info] == []  # no traceback logged
    return report.errors, report.requeue


def _status(items: Path, logs: Path, task_id: str) -> str:
    store = QueueStore(StoreConfig(items_dir=items, logs_dir=logs, fsync=False))
    try:
        return store.read(HOST, QUEUE, task_id).status
    finally:
        store.close()


def test_a_sweep_on_a_read_only_items_disk_says_so_in_one_line_then_sweeps_once_writable(
    items, logs, caplog
):
    [task_id] = _with_a_lapsed_lease(items, logs)
    read_only(items)
    errors, requeued = _sweep(items, logs, caplog)
    assert requeued == 0
    [line] = errors
    assert "Read-only file system" in line and "next pass" in line
    assert _status(items, logs, task_id) == "processing"  # nothing lost, nothing half done
    writable(items)
    assert _sweep(items, logs, caplog) == ([], 1)
    assert _status(items, logs, task_id) == "pending"


def test_a_sweep_without_its_lock_file_on_a_read_only_items_disk_still_runs(items, logs, caplog):
    [task_id] = _with_a_lapsed_lease(items, logs)
    (items / ".sweep.lock").unlink()
    read_only(items)
    [line] = _sweep(items, logs, caplog)[0]
    assert "Read-only file system" in line
    writable(items)
    assert _sweep(items, logs, caplog) == ([], 1)
    assert _status(items, logs, task_id) == "pending"


def test_a_sweep_on_a_full_items_disk_says_so_in_one_line_then_sweeps_once_there_is_room(
    items, logs, caplog
):
    """A full disk refuses the requeue's new copy but still deletes: the done task whose
    retention is over goes all the same, in the same pass."""
    leased, done = _with_a_lapsed_lease(items, logs, leased=1, done=1)
    filler = fill(items)
    errors, requeued = _sweep(items, logs, caplog)
    assert requeued == 0
    [line] = errors
    assert "No space left on device" in line
    assert _status(items, logs, leased) == "processing"
    assert not (items / HOST / QUEUE / "done" / f"{done}.json").exists()  # cleaned
    filler.unlink()
    assert _sweep(items, logs, caplog) == ([], 1)


def test_a_sweep_on_a_read_only_logs_disk_requeues_and_spools_the_lines(items, logs, caplog):
    """The items disk still takes the requeues; their event lines, which the logs disk refuses,
    wait in the spool (spool.py) and reach the day-file at the first pass the disk allows."""
    task_ids = _with_a_lapsed_lease(items, logs, leased=2)
    read_only(logs)
    assert _sweep(items, logs, caplog) == ([], 2)
    # both claimable again: the first refused line did not end the queue's pass
    assert [_status(items, logs, i) for i in task_ids] == ["pending", "pending"]
    writable(logs)
    assert _sweep(items, logs, caplog) == ([], 0)
    lines = [
        orjson.loads(raw)
        for day in (logs / "tasks").glob("*.jsonl")
        for raw in day.read_bytes().splitlines()
        if raw
    ]
    requeued = Counter(line["id"] for line in lines if line["event"] == "requeue")
    assert requeued == dict.fromkeys(task_ids, 1)


def test_a_stale_temp_directory_is_left_alone_without_failing_the_pass(items, logs, caplog):
    _with_a_lapsed_lease(items, logs)
    stray = items / HOST / QUEUE / "pending" / f"{files.TEMP_PREFIX}left-by-hand"
    stray.mkdir()
    os.utime(stray, (0, 0))
    assert _sweep(items, logs, caplog) == ([], 1)
    assert stray.is_dir()


@pytest.mark.slow
def test_the_sweep_loop_outlives_a_read_only_items_disk_and_says_so_once(tmp_path, items, logs):
    root = Path(__file__).resolve().parents[2]
    env = {
        "PATH": os.environ["PATH"], "TASKHOSTER_VAR_DIR": str(tmp_path / "var"), "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "TASKHOSTER_FSYNC": "0",
        "TASKHOSTER_ITEMS_DIR": str(items), "TASKHOSTER_LOGS_DIR": str(logs),
        "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
        "TASKHOSTER_METRICS_DIR": "metrics",  # under var/, not in /dev/shm
    }  # fmt: skip
    manage = [sys.executable, str(root / "manage.py")]
    migrate(env, cwd=root)
    subprocess.run([*manage, "createqueue", HOST, QUEUE], cwd=root, env=env, check=True,
                   capture_output=True)  # fmt: skip
    _with_a_lapsed_lease(items, logs)
    read_only(items)
    loop = subprocess.Popen([*manage, "sweep", "--loop", "--interval", "0.1"], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    with reaped(loop):
        assert loop.stderr is not None
        first = loop.stderr.readline()  # a traceback's first line, were the pass to raise
        assert "Read-only file system" in first and "next pass" in first, first
        writable(items)
        assert loop.stdout is not None
        # the pass after the outage: the task (posted at T0, long ago) is past its queue time
        while "timeout=1" not in loop.stdout.readline():
            assert loop.poll() is None
        _, err = interrupted(loop)
    assert "Traceback" not in err and "Read-only" not in err, err  # said once in all


def test_a_long_lived_sweep_cut_short_by_a_read_only_disk_lists_again_once_writable(
    items, logs, caplog
):
    """A following pass (due_index.py) reads only what changed or fell due: a temp whose
    removal the disk refused, noted nowhere, would be met again only by a pass that lists."""
    _with_a_lapsed_lease(items, logs)
    store = QueueStore(StoreConfig(items_dir=items, logs_dir=logs, fsync=False))
    try:
        sweep_all(store, lambda host, queue: SETTINGS, now=T0)  # the store's whole pass
        temp = items / HOST / QUEUE / "pending" / ".tmp-dead"
        temp.write_bytes(b"half")  # a writer that died, seen by the store's watch
        read_only(items)
        stale = time.time_ns() // 1_000_000 + 120_000  # the temp is two minutes old
        refused = sweep_all(store, lambda host, queue: LAPSED, now=stale)
        assert refused.temp_removed == 0 and refused.errors
        writable(items)
        again = sweep_all(store, lambda host, queue: LAPSED, now=stale + 1000)
        assert again.temp_removed == 1 and not again.errors
        assert not temp.exists()
    finally:
        store.close()
