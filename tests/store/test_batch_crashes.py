"""Batches under crashes, with real processes: a batch post and a batch finish SIGKILLed from
outside in the middle of a batch, and each died at every one of its disk-changing calls; each
with per-file fsync and with syncfs (StoreConfig.flush), whose flushes are steps of their own.

After each crash and one sweep: every acknowledged entry is on disk as it was answered (and
logged), nothing is half-written (every task file parses, one copy per task, no temp file left),
and nothing is lost (every task posted before the finishes is still there, exactly once)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import orjson
import pytest

from queues.store import PostEntry, Report, files, sweep_queue

from . import procs
from .conftest import HOST, QUEUE, Harness

STATE_DIRS = ("pending", "processing", "done")
AFTER_GRACE = 120_000  # the sweep's clock ahead: temps and orphan keys of the crash are swept


class _Acks:
    """The child's JSON lines from a pipe, each with the time it was read: lists are the
    acknowledgements of answered batches, the string "claimed" says a batch finish began."""

    def __init__(self, read_fd: int) -> None:
        self.fd, self.buf = read_fd, b""
        self.lines: list[tuple[float, object]] = []

    def until(self, done) -> None:
        while not done(self):
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return
            self.buf += chunk
            *complete, self.buf = self.buf.split(b"\n")
            now = time.monotonic()
            self.lines += [(now, orjson.loads(line)) for line in complete]

    def batches(self) -> list:
        return [line for _, line in self.lines if isinstance(line, list)]

    def last_batch_took(self) -> float:
        """How long the last answered batch took: from its start (the line before it, a
        "claimed" or the previous batch's answer) to its answer."""
        times = [t for t, _ in self.lines]
        return times[-1] - times[-2] if len(times) >= 2 else 0.0


def _kill_during(
    h: Harness, target, size: int, batches_before_kill: int, into: float = 0.5
) -> list:
    """Run `target` in a child, SIGKILL it once it has answered that many batches and is
    `into` (a fraction) of the way through the next one, as long as the previous one took;
    return every acknowledgement it wrote before it died."""
    read_fd, write_fd = os.pipe()
    child = mp.get_context("fork").Process(
        target=target,
        args=(str(h.config.items_dir), str(h.config.logs_dir), write_fd, size, h.config.flush),
    )
    child.start()
    os.close(write_fd)
    acks = _Acks(read_fd)
    acks.until(lambda a: len(a.batches()) >= batches_before_kill)
    took = acks.last_batch_took()
    if target is procs.batch_finisher:  # aim at the finish, not at the claim before it
        acks.until(lambda a: a.lines[-1][1] == "claimed")
    time.sleep(into * took)  # where the kill lands, not a check: a batch's length is a guess
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
    acks.until(lambda a: False)  # whatever it wrote before the kill landed
    os.close(read_fd)
    assert child.exitcode in (-signal.SIGKILL, 0), child.exitcode
    return acks.batches()


def _task_files(h: Harness) -> dict[str, list[str]]:
    """{id: [directories holding a copy]}, each copy parsed: a torn file fails here."""
    found: dict[str, list[str]] = {}
    for d in STATE_DIRS:
        for path in (h.queue_dir / d).glob("*.json"):
            record = orjson.loads(path.read_bytes())
            assert record["id"] == path.stem and record["status"]
            found.setdefault(path.stem, []).append(d)
    return found


def _sweep_and_check_whole(h: Harness) -> dict[str, list[str]]:
    h.reopen()
    sweep_queue(h.store, HOST, QUEUE, procs.LONG, now=int(time.time() * 1000) + AFTER_GRACE)
    assert h.temp_files() == []
    found = _task_files(h)
    assert all(len(dirs) == 1 for dirs in found.values()), found  # one copy per task
    for key in (h.queue_dir / "keys").glob("*.json"):  # no key whose task never appeared
        assert orjson.loads(key.read_bytes())["id"] in found
    return found


KILLS = [(2, 0.0), (3, 0.5), (3, 0.9)]  # (batches answered, how far into the next one)
FLUSHES = ("fsync", "syncfs")


@pytest.mark.slow
@pytest.mark.parametrize("flush", FLUSHES)
@pytest.mark.parametrize(("batches_before_kill", "into"), KILLS)
def test_a_batch_post_killed_midway_keeps_every_acknowledged_task(
    tmp_path, batches_before_kill, into, flush
):
    h = Harness(tmp_path, fsync=True, flush=flush)
    try:
        h.store.create_queue(HOST, QUEUE)
        acks = _kill_during(h, procs.batch_poster, 40, batches_before_kill, into)
        acked = {tid: n for batch in acks for tid, n in batch}
        assert len(acked) >= 40 * batches_before_kill
        on_disk_before_sweep = _task_files(h)
        temps_before_sweep = len(h.temp_files())
        found = _sweep_and_check_whole(h)
        for tid, n in acked.items():
            assert found.get(tid) == ["pending"], tid
            assert h.on_disk(tid)["pending"]["item"] == {"n": n}
        posted_lines = {e["id"] for e in h.events() if e["event"] == "posted"}
        assert set(acked) <= posted_lines
        assert posted_lines <= set(found)  # never a line for a task that is not there
        # the kill landed inside a batch: it had written tasks it never acknowledged
        print(
            f"killed {into} into a batch: {len(acked)} acknowledged, "
            f"{len(set(on_disk_before_sweep) - set(acked))} unacknowledged tasks and "
            f"{temps_before_sweep} temp files on disk"
        )
    finally:
        h.close()


@pytest.mark.slow
@pytest.mark.parametrize("flush", FLUSHES)
@pytest.mark.parametrize(("batches_before_kill", "into"), KILLS)
def test_a_batch_finish_killed_midway_keeps_every_acknowledged_outcome(
    tmp_path, batches_before_kill, into, flush
):
    h = Harness(tmp_path, fsync=False, flush=flush)  # the setup: 400 posts, quickly
    h.store.post_many(HOST, QUEUE, [PostEntry(item={"n": i}) for i in range(100)],
                      settings=procs.LONG, posted_by="a")  # fmt: skip
    posted = set(_task_files(h))
    for _ in range(3):
        more = h.store.post_many(HOST, QUEUE, [PostEntry(item={}) for _ in range(100)],
                                 settings=procs.LONG, posted_by="a")  # fmt: skip
        posted |= {p.task.id for p in more}
    try:
        acks = _kill_during(h, procs.batch_finisher, 40, batches_before_kill, into)
        acked = {tid: status for batch in acks for tid, status in batch}
        assert len(acked) >= 40 * batches_before_kill
        done = {t for t, dirs in _task_files(h).items() if "done" in dirs}
        print(f"killed {into} into a batch: {len(acked)} acknowledged, "
              f"{len(done - set(acked))} unacknowledged tasks in done/")  # fmt: skip
        found = _sweep_and_check_whole(h)
        assert set(found) == posted  # nothing lost, nothing made up
        for tid, status in acked.items():
            record = h.store.read(HOST, QUEUE, tid)
            assert record.status.value == status, (tid, record.status, status)
            if status == "pending":
                assert record.last_error is not None and record.attempts == 1
        ended = {e["id"]: e["event"] for e in h.events() if e["event"] in ("result", "requeue")}
        for tid in acked:
            assert tid in ended  # logged before it was answered
        for tid, event in ended.items():  # and never a line for a change not on disk
            want = "finished" if event == "result" else "pending"
            assert h.store.read(HOST, QUEUE, tid).status.value == want
    finally:
        h.close()


# -- a death at every disk-changing call of a batch ---------------------------------------------


def _crash_batch_at(config, op: str, ids: list[str], k: int) -> None:
    from queues.store import QueueStore

    store = QueueStore(config)
    files.FAULTS.reset()
    files.FAULTS.exit_at = k
    _run_batch(store, op, ids)
    os._exit(0)


def _run_batch(store, op: str, ids: list[str]):
    if op == "post_many":
        entries = [PostEntry(item={"n": i}, idempotency_key="k" if i == 1 else None)
                   for i in range(3)]  # fmt: skip
        return store.post_many(HOST, QUEUE, entries, settings=procs.LONG, posted_by="a")
    outcomes = ["result", "fail", "retry"]
    reports = [Report(task_id=t, attempt=1, outcome=o, result={"o": o})
               for t, o in zip(ids, outcomes, strict=True)]  # fmt: skip
    return store.finish_many(HOST, QUEUE, reports, settings=procs.LONG, worker="box-1")


@pytest.mark.slow
@pytest.mark.parametrize("flush", FLUSHES)
@pytest.mark.parametrize("op", ["post_many", "finish_many"])
def test_a_batch_dying_at_every_step_leaves_each_task_old_or_new(tmp_path: Path, op, flush):
    final = {"post_many": ["pending"] * 3, "finish_many": ["finished", "failed", "pending"]}[op]
    for k in range(1, 200):
        h = Harness(tmp_path / f"k{k}", fsync=True, flush=flush)
        h.store.create_queue(HOST, QUEUE)
        ids: list[str] = []
        if op == "finish_many":
            # posted now (not at the harness's T0): the sweep must not time them out
            ids = [procs.run_op(h.store, "post", None).task.id for _ in range(3)]
            h.store.claim(HOST, QUEUE, settings=procs.LONG, worker="box-1", max_tasks=3)
        child = mp.get_context("fork").Process(target=_crash_batch_at, args=(h.config, op, ids, k))
        child.start()
        child.join(30)
        assert child.exitcode in (0, 137)
        found = _sweep_and_check_whole(h)
        if op == "post_many":
            assert len(found) <= 3
            statuses = [h.store.read(HOST, QUEUE, t).status.value for t in found]
            assert set(statuses) <= {"pending"}
            if child.exitcode == 0:
                assert len(found) == 3
        else:
            assert set(found) == set(ids)
            for tid, new in zip(ids, final, strict=True):
                status = h.store.read(HOST, QUEUE, tid).status.value
                assert status in ("processing", new), (k, tid, status)
                assert status == new or child.exitcode == 137
        h.close()
        if child.exitcode == 0:
            break  # the batch made fewer than k calls: every one of them has been crashed at
    else:
        pytest.fail("the batch never completed")
    kinds = _steps_of(tmp_path / "steps", op, flush)
    print(op, flush, "crash points", k - 1, "syncfs among them:", kinds.count("syncfs"))
    assert len(kinds) == k - 1  # every step was crashed at, each flush among them
    assert ("syncfs" in kinds) == (flush == "syncfs")
    assert k > 10


def _steps_of(tmp_path: Path, op: str, flush: str) -> list[str]:
    """The disk-changing calls of one batch, as the crashes above met them."""
    h = Harness(tmp_path, fsync=True, flush=flush)
    try:
        h.store.create_queue(HOST, QUEUE)
        ids: list[str] = []
        if op == "finish_many":
            ids = [procs.run_op(h.store, "post", None).task.id for _ in range(3)]
            h.store.claim(HOST, QUEUE, settings=procs.LONG, worker="box-1", max_tasks=3)
        h.reopen()
        files.FAULTS.reset()
        files.FAULTS.record = True
        _run_batch(h.store, op, ids)
        return list(files.FAULTS.kinds)
    finally:
        files.FAULTS.reset()
        h.close()
