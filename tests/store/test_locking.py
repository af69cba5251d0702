"""A change locks the copy it read through the descriptor it read it from (copies.locked): a
record rewritten while the change waits for the lock must be read again, never overwritten
from the stale read. The lock is a real flock held by this test; the change waits in a thread
(flock locks belong to the open file, so two descriptors of one process exclude each other)."""

from __future__ import annotations

import os
import threading
import time

import orjson

from queues.store import files, paths

from .conftest import HOST, QUEUE, SETTINGS, T0


def _waiters_on(inode: int) -> int:
    """How many flock requests wait (blocked) on this inode, as the kernel lists them."""
    count = 0
    with open("/proc/locks") as locks:
        for line in locks:
            fields = line.split()
            if "->" in fields and fields[fields.index("->") + 1] == "FLOCK":
                device_inode = fields[fields.index("->") + 5]
                if int(device_inode.rsplit(":", 1)[1]) == inode:
                    count += 1
    return count


def _wait_for_a_waiter(inode: int) -> None:
    for _ in range(2000):  # a bound on the polling, not a timing claim: 20 s at most
        if _waiters_on(inode):
            return
        time.sleep(0.01)
    raise AssertionError("the change never waited for the lock")


def test_a_record_rewritten_while_a_change_waits_for_its_lock_is_read_again(h):
    task = h.post()
    claimed = h.claim()
    qd = h.held()
    name = paths.task_file(task.id)
    fd = files.lock_at(qd.fd("processing"), name, block=True)
    assert fd is not None
    inode = os.fstat(fd).st_ino
    answers = []

    def progress() -> None:
        answers.append(
            h.store.progress(
                HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1",
                attempt=claimed.attempts, progress={"step": 2}, now=T0 + 3000,
            )
        )  # fmt: skip

    waiting = threading.Thread(target=progress)
    try:
        waiting.start()
        _wait_for_a_waiter(inode)  # the change has read the record and waits for its lock
        # another writer, holding the lock, replaces the record (temp-then-rename)
        rewritten = claimed.replace(cancel_requested=True, updated_at=T0 + 2000)
        data = orjson.dumps(rewritten.to_record())
        files.write_durable(qd.fd("processing"), name, data, fsync=False)
    finally:
        os.close(fd)
        waiting.join(30)
    assert not waiting.is_alive()
    record = h.on_disk(task.id)["processing"]
    # built on the rewritten record, not on the one read before the lock
    assert record["rev"] == rewritten.rev + 1
    assert record["cancelRequested"] is True
    assert record["progress"] == {"step": 2}
    assert answers[0].rev == record["rev"]


def test_a_change_of_a_copy_moved_away_while_it_waits_finds_the_task_in_its_new_place(h):
    task = h.post()
    claimed = h.claim()
    qd = h.held()
    name = paths.task_file(task.id)
    fd = files.lock_at(qd.fd("processing"), name, block=True)
    assert fd is not None
    inode = os.fstat(fd).st_ino
    answers = []

    def cancel() -> None:
        answers.append(h.store.cancel(HOST, QUEUE, task.id, settings=SETTINGS, now=T0 + 3000))

    waiting = threading.Thread(target=cancel)
    try:
        waiting.start()
        _wait_for_a_waiter(inode)
        # the holder moves the task back to pending (content first), as a lapsed lease does
        requeued = claimed.replace(status=claimed.status.PENDING, lease=None, updated_at=T0 + 2000)
        files.move(qd.fd("processing"), qd.fd("pending"), name,
                   orjson.dumps(requeued.to_record()), fsync=False)  # fmt: skip
    finally:
        os.close(fd)
        waiting.join(30)
    assert not waiting.is_alive()
    # the cancel met the task where it now is (pending) and ended it, not the stale copy
    assert h.where(task.id) == ["done"]
    record = h.on_disk(task.id)["done"]
    assert record["status"] == "cancelled"
    assert record["rev"] == requeued.rev + 1
