"""A claim that runs out of file descriptors (EMFILE) fails loudly and loses no task.

The limit is real: RLIMIT_NOFILE is lowered to this process's highest descriptor and the rest
filled, so the store's next open() fails as it would under load. Only a file that is gone (or
is not a task file, which the sweep quarantines) may be passed over; any other OSError used to
drop the task from the pending index until some later event brought its name back."""

from __future__ import annotations

import errno
import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from queues.store import QueueSettings, QueueStore, StorageUnavailable, files

from .conftest import HOST, QUEUE, T0

SETTINGS = QueueSettings()


@contextmanager
def no_free_descriptors() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(n) for n in os.listdir("/proc/self/fd"))
    fillers: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    try:
        while True:  # fill the holes below the limit: then every open() is refused
            try:
                fillers.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            except OSError as exc:
                assert exc.errno == errno.EMFILE
                break
        yield
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _claim(store: QueueStore, now: int) -> list[str]:
    tasks = store.claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", now=now)
    return [t.id for t in tasks]


def test_emfile_on_locking_a_candidate_raises_and_the_task_stays_claimable(h):
    task = h.post()
    h.store.stats(HOST, QUEUE, now=T0)  # the index has learned the task: the claim opens it next
    with no_free_descriptors(), pytest.raises(StorageUnavailable) as refused:
        _claim(h.store, T0 + 1000)
    assert refused.value.code == "storage_unavailable"
    assert isinstance(refused.value.__cause__, OSError)
    assert refused.value.__cause__.errno == errno.EMFILE
    assert h.where(task.id) == ["pending"]
    # nothing was posted or moved since: the index still holds the task
    assert _claim(h.store, T0 + 2000) == [task.id]
    assert h.event_names(task.id) == ["posted", "claimed"]


def test_emfile_on_learning_a_new_pending_name_raises_and_the_task_stays_claimable(h):
    h.store.create_queue(HOST, QUEUE)
    h.store.stats(HOST, QUEUE, now=T0)  # this process's index exists and listens
    other = QueueStore(h.config)  # another process's post: this index hears only its name
    try:
        task = other.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="a", now=T0).task
    finally:
        other.close()
    with no_free_descriptors(), pytest.raises(StorageUnavailable):
        _claim(h.store, T0 + 1000)
    assert _claim(h.store, T0 + 2000) == [task.id]


def test_a_vanished_candidate_is_still_passed_over_quietly(h):
    task = h.post()
    h.store.stats(HOST, QUEUE, now=T0)
    (h.queue_dir / "pending" / f"{task.id}.json").unlink()
    assert _claim(h.store, T0 + 1000) == []


def test_emfile_on_the_claims_rewrite_is_storage_unavailable_and_puts_the_task_back(h):
    """Past the lock and the rename, the claim's new record cannot be created (the project's
    fault injection at the temp file's open): 503, and the record is back in pending/."""
    task = h.post()
    files.FAULTS.reset()
    files.FAULTS.fail_kind, files.FAULTS.fail_at, files.FAULTS.fail_errno = "open", 1, errno.EMFILE
    try:
        with pytest.raises(StorageUnavailable):
            _claim(h.store, T0 + 1000)
    finally:
        files.FAULTS.reset()
    assert h.where(task.id) == ["pending"] and h.event_names(task.id) == ["posted"]
    assert _claim(h.store, T0 + 2000) == [task.id]
