"""Crash at every file-system step of every operation, and injected EIO/ENOSPC."""

from __future__ import annotations

import errno
import multiprocessing as mp
import time
from pathlib import Path

import orjson
import pytest

from queues.store import QueueStore, StorageUnavailable, StoreConfig, files, sweep_queue

from . import procs
from .conftest import HOST, QUEUE, Harness

W = {"settings": procs.LONG, "worker": "box-1", "attempt": 1}
# op -> (setup steps, the statuses allowed after a crash and one sweep: old or new)
OPS = {
    "post": ([], {None, "pending"}),
    "post_keyed": ([], {None, "pending"}),
    "claim": (["post"], {"pending", "processing"}),
    "progress": (["post", "claim"], {"processing"}),
    "finish": (["post", "claim"], {"processing", "finished"}),
    "fail": (["post", "claim"], {"processing", "failed"}),
    "requeue": (["post", "claim"], {"processing", "pending"}),
    "cancel": (["post"], {"pending", "cancelled"}),
    "cancel_running": (["post", "claim"], {"processing"}),
    "retry": (["post", "claim", "fail"], {"failed", "pending"}),
    "fetch": (["post", "claim", "finish"], {"finished"}),
    "sweep_lapse": (["post", "claim"], {"processing", "pending"}),
    "sweep_timeout": (["post"], {"pending", "failed"}),
    "sweep_clean": (["post", "claim", "finish"], {"finished", None}),
}


def prepare(root: Path, steps: list[str]) -> tuple[Harness, str | None]:
    h = Harness(root, fsync=True)
    h.store.create_queue(HOST, QUEUE)
    task_id = None
    for step in steps:
        result = procs.run_op(h.store, step, task_id)
        if step == "post":
            task_id = result.task.id
    return h, task_id


def check_recovered(h: Harness, op: str, task_id: str | None, allowed: set) -> str | None:
    h.reopen()
    sweep_queue(h.store, HOST, QUEUE, procs.LONG, now=int(time.time() * 1000) + 120_000)
    assert h.temp_files() == []
    ids = {
        p.stem for d in ("pending", "processing", "done") for p in (h.queue_dir / d).glob("*.json")
    }
    assert len(ids) <= 1
    for i in ids:
        assert len(h.where(i)) == 1, h.on_disk(i)  # one copy per task
    task_id = task_id or (ids.pop() if ids else None)
    status = (
        None
        if task_id is None or not h.where(task_id)
        else h.store.read(HOST, QUEUE, task_id).status.value
    )
    assert status in allowed, (op, status)
    # no idempotency key is left whose task never appeared (the sweep ran past the grace period)
    for key in (h.queue_dir / "keys").glob("*.json"):
        assert h.where(orjson.loads(key.read_bytes())["id"]), (op, "orphan key")
    for day in (h.config.logs_dir / "tasks").glob("*.jsonl"):
        for raw in day.read_bytes().splitlines():
            orjson.loads(raw)
    return status


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(OPS))
def test_crash_at_every_step(tmp_path, op):
    steps, allowed = OPS[op]
    ctx = mp.get_context("fork")
    seen = set()
    for k in range(1, 60):
        h, task_id = prepare(tmp_path / f"k{k}", steps)
        child = ctx.Process(target=procs.crash_at, args=(h.config, op, task_id, k))
        child.start()
        child.join(30)
        assert child.exitcode in (0, 137)
        seen.add(check_recovered(h, op, task_id, allowed))
        h.store.close()
        if child.exitcode == 0:
            break  # the operation made fewer than k calls: every step has been crashed at
    else:
        pytest.fail("the operation never completed")
    assert k > 2, k
    print(op, "crash points", k - 1)
    # both outcomes were reached, except where the new state shares the old status
    assert seen == allowed or op in ("progress", "cancel_running", "fetch")


@pytest.mark.parametrize("kind", ["write", "fsync", "rename", "fsync_dir"])
@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_io_errors_fail_the_operation_and_leave_the_old_state(tmp_path, kind, code):
    h = Harness(tmp_path, fsync=True)
    try:
        task = h.post(settings=procs.LONG)
        for op, expect in (("post", None), ("claim", "pending"), ("finish", "processing")):
            if op == "claim" and kind.startswith("fsync"):
                procs.run_op(h.store, op, task.id)  # a claim flushes nothing: no fsync to fail
                continue
            if op == "finish" and h.where(task.id) != ["processing"]:
                h.claim(settings=procs.LONG)
            before = {i: h.on_disk(i) for i in _ids(h)}
            lines = len(h.events())
            files.FAULTS.reset()
            files.FAULTS.fail_kind, files.FAULTS.fail_at, files.FAULTS.fail_errno = kind, 1, code
            try:
                with pytest.raises(StorageUnavailable) as err:
                    procs.run_op(h.store, op, task.id)
            finally:
                files.FAULTS.reset()
            assert err.value.code == "storage_unavailable"
            if kind != "fsync_dir":  # a failed directory fsync comes after the rename
                assert {i: h.on_disk(i) for i in _ids(h)} == before
                assert len(h.events()) == lines  # nothing acknowledged, nothing logged
                if expect:
                    assert h.store.read(HOST, QUEUE, task.id).status.value == expect
            assert h.temp_files() == []
        # the next operations work
        done = (
            procs.run_op(h.store, "finish", task.id) if h.where(task.id) == ["processing"] else None
        )
        assert done is None or done.task.status.value == "finished"
        assert h.post(settings=procs.LONG).status.value == "pending"
    finally:
        h.store.close()


def _ids(h: Harness) -> set[str]:
    return {
        p.stem for d in ("pending", "processing", "done") for p in (h.queue_dir / d).glob("*.json")
    }


def test_an_event_line_the_log_refuses_is_spooled_not_lost(tmp_path):
    store = QueueStore(StoreConfig(items_dir=tmp_path / "i", logs_dir=tmp_path / "l", fsync=True))
    try:
        files.FAULTS.fail_kind, files.FAULTS.fail_at, files.FAULTS.fail_errno = (
            "append",
            1,
            errno.ENOSPC,
        )
        first = store.post(HOST, QUEUE, {}, settings=procs.LONG, posted_by=None).task
        assert list((tmp_path / "i" / ".unlogged").iterdir())  # acknowledged, its line spooled
        files.FAULTS.reset()
        second = store.post(HOST, QUEUE, {}, settings=procs.LONG, posted_by=None).task
    finally:
        files.FAULTS.reset()
        store.close()
    [day] = (tmp_path / "l" / "tasks").glob("*.jsonl")
    posted = [orjson.loads(line)["id"] for line in day.read_bytes().splitlines()]
    assert posted == [first.id, second.id]  # the spooled line drained before the next one
