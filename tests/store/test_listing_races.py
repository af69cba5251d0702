"""A name listed and gone (or come) before its use: skipped, never an exception.

Every pass of the store that lists a directory and then stats, opens or reads what it listed
(the sweep's temp and key passes, retention of day-files and archives, the queue listing) meets
names that posts, claims and other sweeps rename away in between."""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import orjson
import pytest

from queues.store import QueueSettings, files, sweep_all, sweep_queue

from .conftest import HOST, QUEUE, SETTINGS, T0

OLD = T0 / 1000 - 3600  # an mtime past the sweep's grace for temps and keys


@pytest.fixture
def q(h):
    h.store.create_queue(HOST, QUEUE)
    return h


@pytest.fixture
def faults():
    files.FAULTS.reset()
    yield files.FAULTS
    files.FAULTS.reset()


def _stale(path: Path, data: bytes = b"x") -> Path:
    path.write_bytes(data)
    os.utime(path, (OLD, OLD))
    return path


def test_a_temp_gone_between_the_listing_and_its_stat_is_skipped(q, faults):
    pending = q.queue_dir / "pending"
    temps = [_stale(pending / f".tmp-race-{n}") for n in range(2)]

    def their_posts_finish(call: int, kind: str) -> None:
        # the first stale temp is about to be removed: both posts finish now, the one listed
        # second before the sweep reaches its entry
        if kind == "unlink" and faults.before is not None:
            faults.before = None
            for n, temp in enumerate(temps):
                temp.rename(pending / f"{n:016x}.json.posted")

    faults.before = their_posts_finish
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0)
    assert report.temp_removed == 0 and report.errors == []
    assert not any(temp.exists() for temp in temps)


def test_a_key_gone_between_the_listing_and_its_stat_is_skipped(q, faults):
    keys = q.queue_dir / "keys"
    names = [_stale(keys / f"{n:032x}.json", b'{"id": "0000000000000001"}') for n in range(2)]

    def cleaned_with_their_tasks(call: int, kind: str) -> None:
        if kind == "unlink" and faults.before is not None:
            faults.before = None
            for name in names:
                name.unlink()

    faults.before = cleaned_with_their_tasks
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0)
    assert report.keys_removed == 0 and report.errors == []


def test_a_day_file_pruned_by_another_sweep_meanwhile_is_skipped(q, faults):
    tasks = q.config.logs_dir / "tasks"
    old_days = [_stale(tasks / f"2020-01-0{d}.jsonl") for d in (1, 2)]

    def another_sweep_prunes_them(call: int, kind: str) -> None:
        if kind == "unlink" and faults.before is not None:
            faults.before = None
            for day in old_days:
                day.unlink()

    faults.before = another_sweep_prunes_them
    report = sweep_all(q.store, lambda host, queue: SETTINGS, now=T0)
    assert report.logs_pruned == 0 and report.errors == []


def _renamer(pending: str, rounds: int) -> None:
    """A poster at full speed: each round writes a temp, renames it to its task's name and
    takes the task away again (a claimer's rename out), so temps come and go all the time."""
    record = orjson.dumps({"id": "x"})
    for n in range(rounds):
        temp = os.path.join(pending, f".tmp-racer-{n:x}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, record)
        os.close(fd)
        os.utime(temp, (OLD, OLD))  # stale at once: the sweep would remove it, if still there
        name = os.path.join(pending, f"{n % 4096:016x}.json.moved")
        try:
            os.rename(temp, name)
        except FileNotFoundError:
            continue  # the sweep removed it first, as it may a temp this old
        os.unlink(name)


@pytest.mark.slow
def test_the_sweep_loop_survives_a_poster_renaming_temps_under_it(q):
    """Real processes racing: the sweep passes over the queue in a loop while a poster renames
    temps in and out of pending/; no pass may fail."""
    ctx = mp.get_context("fork")
    racer = ctx.Process(target=_renamer, args=(str(q.queue_dir / "pending"), 20_000))
    racer.start()
    passes = 0
    try:
        while racer.is_alive():
            report = sweep_queue(q.store, HOST, QUEUE, QueueSettings(), now=T0)
            assert report.errors == []
            passes += 1
    finally:
        racer.kill()
        racer.join()
    assert passes > 0 and racer.exitcode in (0, -9), racer.exitcode


def test_a_copy_replaced_by_a_fifo_after_it_was_read_is_left_to_the_next_pass(q, faults):
    """The sweep read a task's copies and is about to change the winner when something that
    is no record takes its name: the change is skipped (the lock is never taken on it) and
    the next pass quarantines what is there."""
    task_id = "9f2c1a0b7d4e6f83"
    base = {"id": task_id, "host": HOST, "queue": QUEUE, "item": {}, "postedBy": None,
            "postedAt": T0, "updatedAt": T0, "progress": None, "result": None, "error": None,
            "finishedAt": None, "fetchedAt": None}  # fmt: skip
    q.plant("pending", {**base, "status": "pending", "attempts": 0, "lease": None, "rev": 1})
    lapsed = {"worker": "box-1", "until": T0 - 1}
    q.plant("processing", {**base, "status": "processing", "attempts": 1, "lease": lapsed,
                           "rev": 2})  # fmt: skip
    winner = q.queue_dir / "processing" / f"{task_id}.json"

    def planted_meanwhile(call: int, kind: str) -> None:
        if kind == "unlink" and faults.before is not None:  # the losing copy goes first
            faults.before = None
            winner.unlink()
            os.mkfifo(winner)

    faults.before = planted_meanwhile
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0)
    assert report.reconciled == 1 and report.requeue == 0 and report.errors == []
    assert sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0).quarantined == 1
