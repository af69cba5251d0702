"""Finding a task's copies, choosing the one that counts, and changing it under its lock.

A content-first move can leave a task in two directories; the copy with the highest `rev` wins
for reads, claims and the sweep alike. A change locks the winning file (flock on its inode), checks
the name still points at that inode, writes the new record, and only then releases: a second
writer that waited finds the name replaced or gone and starts again from the new state.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import orjson

from . import files, paths, spares
from .errors import CorruptRecord, NotFound, StorageUnavailable
from .paths import QueueDirs
from .records import Task

PRECEDENCE = {"done": 0, "processing": 1, "pending": 2}  # ties (never written by us) go to done


@dataclass(frozen=True)
class Copy:
    directory: str
    task: Task
    raw: bytes = b""  # the bytes it was parsed from, so a re-read under the lock can skip parsing
    # the fstat of the descriptor it was read from, which its lock compares (files.lock_open)
    opened: os.stat_result | None = field(default=None, compare=False, repr=False)


def parse(data: bytes) -> Task:
    try:
        return Task.from_record(orjson.loads(data))
    except orjson.JSONDecodeError as exc:
        raise CorruptRecord("A task file is not JSON.") from exc


def belongs(qd: QueueDirs, task_id: str, task: Task) -> bool:
    """Whether a record is the one its place names: its id the file's, its host and queue the
    directories'. One that is not (planted, or copied from another tenant's queue) is never
    claimed, listed or changed as it is: the sweep and the claim quarantine it."""
    return task.id == task_id and task.host == qd.host and task.queue == qd.queue


def exists(qd: QueueDirs, task_id: str) -> bool:
    """Whether any state directory has a file under the task's name now (not read). The
    directories are looked at in reverse order, so that a task moving back (a retry or a
    requeue writes its pending/ copy before it unlinks the other) is met."""
    for directory in reversed(paths.STATE_DIRS):
        try:
            os.stat(paths.task_file(task_id), dir_fd=qd.fd(directory), follow_symlinks=False)
        except FileNotFoundError:
            continue
        return True
    return False


def read_copy(qd: QueueDirs, directory: str, task_id: str) -> Task | None:
    """The record in one directory; None when absent. Raises CorruptRecord (symlinks too)."""
    found = read_found(qd, directory, task_id)
    return found.task if found is not None else None


def read_found(qd: QueueDirs, directory: str, task_id: str) -> Copy | None:
    """read_copy's Copy, with the raw bytes and the fstat of the file it was read from."""
    opened = _open_copy(qd, directory, task_id)
    if opened is None:
        return None
    os.close(opened[0])
    return opened[1]


def _open_copy(qd: QueueDirs, directory: str, task_id: str) -> tuple[int, Copy] | None:
    """The record in one directory and the open descriptor it was read from (the caller
    closes it); None when absent. Raises CorruptRecord (symlinks too)."""
    try:
        fd, opened = files.open_regular(qd.fd(directory), paths.task_file(task_id))
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink planted in the store is never followed
        raise CorruptRecord(f"Task file {task_id} cannot be read: {exc.strerror}.") from exc
    try:
        data = files.read_fd(fd)
        return fd, Copy(directory, parse(data), data, opened)
    except OSError as exc:
        os.close(fd)
        raise CorruptRecord(f"Task file {task_id} cannot be read: {exc.strerror}.") from exc
    except BaseException:
        os.close(fd)
        raise


def _open_copies(qd: QueueDirs, task_id: str) -> list[tuple[int, Copy]]:
    """Every readable copy with its open descriptor, the winner first (the caller closes
    them). Corrupt copies are left for the sweep."""
    found: list[tuple[int, Copy]] = []
    try:
        for directory in paths.STATE_DIRS:
            try:
                opened = _open_copy(qd, directory, task_id)
            except CorruptRecord:
                continue
            if opened is None:
                continue
            if not belongs(qd, task_id, opened[1].task):
                os.close(opened[0])
                continue
            found.append(opened)
    except BaseException:
        for fd, _ in found:
            os.close(fd)
        raise
    found.sort(key=lambda o: (o[1].task.rev, PRECEDENCE[o[1].directory]), reverse=True)
    return found


def copies(qd: QueueDirs, task_id: str) -> list[Copy]:
    """Every readable copy, the winner first. Corrupt copies are left for the sweep."""
    opened = _open_copies(qd, task_id)
    for fd, _ in opened:
        os.close(fd)
    return [copy for _, copy in opened]


def winner(qd: QueueDirs, task_id: str) -> Copy:
    found = copies(qd, task_id)
    if not found:
        raise NotFound()
    return found[0]


@contextmanager
def locked(qd: QueueDirs, task_id: str) -> Iterator[Copy]:
    """The winning copy, locked against every other writer for the duration of the block.

    The winner is locked through the descriptor it was read from: once the lock is held and
    its name still names that inode, the record read is the record on disk (a task file never
    changes once named), so it is neither opened nor read a second time."""
    name = paths.task_file(task_id)
    for _ in range(100):
        opened = _open_copies(qd, task_id)
        if not opened:
            raise NotFound()
        (fd, best), losers = opened[0], opened[1:]
        for other, _ in losers:
            os.close(other)
        try:
            if not files.lock_open(qd.fd(best.directory), name, fd, block=True, opened=best.opened):
                continue  # moved or rewritten between the read and the lock: look again
            yield best
            return
        finally:
            os.close(fd)
    raise StorageUnavailable(f"Task {task_id} kept changing; try again.")


Left = list[tuple[int, str]]  # (directory, name): the copies a change left behind it


def commit(qd: QueueDirs, source: str, new: Task, *, fsync: files.Durable) -> Left:
    """Write `new` over the copy in `source`: in place, or content first into its directory.
    Returns the copy a move leaves in `source`, for `retire` once the change is durable: a
    crash before then leaves the task in two directories, and the copy with the higher rev
    (the new one) wins; the sweep deletes the other (store.md, third version)."""
    target = new.status.directory
    name = paths.task_file(new.id)
    files.write_durable(qd.fd(target), name, orjson.dumps(new.to_record()), fsync=fsync)
    return [] if target == source else [(qd.fd(source), name)]


def commit_many(
    qd: QueueDirs, changes: list[tuple[str, Task]], *, fsync: files.Durable, keep: bool = False
) -> Left:
    """commit() for a batch of (source directory, new record), sharing the flushes: every new
    record is written into its directory and fsynced (files.write_temps: all at once), then
    renamed into place, then each destination directory is fsynced once. Returns the copies
    the moves left behind, for `retire` once the batch is durable. `keep`: a record written
    over in place (a claim's, not flushed) keeps its inode as a spare (spares.keep)."""
    targets = [qd.fd(new.status.directory) for _, new in changes]
    left: Left = [
        (qd.fd(source), paths.task_file(new.id))
        for source, new in changes
        if new.status.directory != source
    ]
    if spares.usable(fsync):
        writes = [
            (fd, paths.task_file(new.id), orjson.dumps(new.to_record()),
             new.status.directory == source)
            for fd, (source, new) in zip(targets, changes, strict=True)
        ]  # fmt: skip
        spares.write_all(qd, writes, fsync=fsync)
        return left
    syncs = files.DirSyncs(fsync=fsync)
    temps = files.write_temps(
        [
            (fd, orjson.dumps(new.to_record()))
            for fd, (_, new) in zip(targets, changes, strict=True)
        ],
        fsync=fsync,
    )
    for index, ((source, new), target_fd, temp) in enumerate(
        zip(changes, targets, temps, strict=True)
    ):
        try:
            if keep and new.status.directory == source:
                spares.keep(qd, target_fd, paths.task_file(new.id))
            files.commit_temp(target_fd, temp, paths.task_file(new.id), fsync=False)
        except BaseException:
            for later_fd, later in zip(targets[index + 1 :], temps[index + 1 :], strict=True):
                files.discard(later_fd, later)
            raise
        syncs.owe(target_fd)
    syncs.flush()
    return left


def retire(qd: QueueDirs, left: Left, *, fsync: files.Durable) -> None:
    """Remove the copies a change left behind, once the change is durable: into the queue's
    spares where its writes use them (spares.usable), else unlinked. The directories they
    leave are not flushed (a lost removal leaves a losing copy the sweep deletes)."""
    into_spares = spares.usable(fsync)
    for dir_fd, name in left:
        spares.retire(qd, dir_fd, name, into_spares=into_spares)
