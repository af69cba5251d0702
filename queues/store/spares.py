"""Spare inodes: the files a queue keeps beside its state directories to write records into,
so that a batch's writes neither create nor free an inode (store.md, fourth version).

On this machine's ext4 (mounted with `discard`) creating and freeing an inode costs far more
than writing a few hundred bytes into one. A batch under syncfs takes a spare for each record
(locked, then written over and cut to length), flushes that data, and only then renames it into
place: data=ordered orders only new blocks with the commit that names them, so bytes written
over a reused inode must be durable before its name is, or a power cut could show another
task's old record under this task's name. A file a move or retention retires is renamed into
the spares instead of unlinked. Nothing in `spare/` is ever a task: listings, claims and the
sweep read only the state directories, and a crash leaves only spares. The sweep keeps the pool
within POOL_BOUND (`trim`). Where renameat2 or syncfs is missing, the store writes fresh inodes
as before (`usable`).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import secrets

from . import files, paths
from .paths import QueueDirs

SPARE_DIR = paths.SPARE_DIR
# spares a queue keeps at most: enough for a few batches of the largest size (1000) at once
POOL_BOUND = 2048
_prefix = f"s-{secrets.token_hex(6)}-"
_counter = itertools.count()


def _new_prefix_in_child() -> None:
    global _prefix, _counter
    _prefix, _counter = f"s-{secrets.token_hex(6)}-", itertools.count()


os.register_at_fork(after_in_child=_new_prefix_in_child)


def spare_name() -> str:
    """A name in spare/ no other process picks (its random prefix, then a counter)."""
    return f"{_prefix}{next(_counter):x}"


def usable(fsync: files.Durable) -> bool:
    """Whether a write told `fsync` may use spares: a syncfs store's deferred batch (its data
    flush is one syncfs for the whole batch) where the C library has renameat2."""
    return isinstance(fsync, files.Deferred) and files.can_exchange()


def take(qd: QueueDirs, count: int) -> list[tuple[int, str]]:
    """Up to `count` spares of the queue, each as (open descriptor, name), locked against every
    other writer until the caller closes the descriptor (after naming it)."""
    if count <= 0:
        return []
    spare = qd.fd(SPARE_DIR)
    taken: list[tuple[int, str]] = []
    try:
        for entry in os.scandir(spare):
            if len(taken) == count:
                break
            fd = files.open_spare(spare, entry.name)
            if fd is not None:
                taken.append((fd, entry.name))
    except BaseException:
        for fd, _ in taken:
            os.close(fd)
        raise
    return taken


def retire(qd: QueueDirs, dir_fd: int, name: str, *, into_spares: bool) -> None:
    """Remove the file `name` of the directory `dir_fd`: into the spares (`into_spares`), or
    unlinked. FileNotFoundError when another writer removed it first."""
    files.retire_into(dir_fd, name, qd.fd(SPARE_DIR) if into_spares else None, spare_name())


def kept_by(fsync: files.Durable) -> bool:
    """Whether a store flushing by `fsync` (its own, not a write's) keeps spares at all."""
    return usable(files.deferred(fsync))


def keep(qd: QueueDirs, dir_fd: int, name: str) -> None:
    """Give the file `name` a second name in the spares before a fresh file is renamed over
    it (a claim's leased record over the pending one): its inode stays, a spare, instead of
    being freed. The fresh file keeps the rename over a file that ext4 orders with its data,
    which an unflushed claim relies on; a spare written there could not be."""
    files.link_into(dir_fd, name, qd.fd(SPARE_DIR), spare_name())


def trim(qd: QueueDirs, bound: int | None = None) -> int:
    """Unlink the spares past `bound` (POOL_BOUND by default; the sweep's pass): how many
    went. One another writer holds locked is left for the next pass."""
    spare = qd.fd(SPARE_DIR)
    names = [entry.name for entry in os.scandir(spare)]
    removed = 0
    for name in names[POOL_BOUND if bound is None else bound :]:
        fd = files.open_spare(spare, name)
        if fd is None:
            continue
        try:
            with contextlib.suppress(FileNotFoundError):
                files.unlink(spare, name, fsync=False)
                removed += 1
        finally:
            os.close(fd)
    return removed


def flush_data(fsync: files.Durable) -> None:
    """The flush between a batch's writes into spares and their renames (data before names)."""
    files.flush_items(fsync)


# (directory, name, record, in place): in place, the spare is swapped with the record it
# replaces (RENAME_EXCHANGE), which becomes a spare in its turn
Write = tuple[int, str, bytes, bool]


def write_all(qd: QueueDirs, writes: list[Write], *, fsync: files.Durable) -> None:
    """Write a batch's records into spares (fresh temps for those the pool lacks), flush that
    data, then name each: the batch's one further flush, after its lines, is the caller's."""
    taken = take(qd, len(writes))
    spare = qd.fd(SPARE_DIR)
    temps: list[str] = []
    try:
        for (fd, _), (_, _, data, _) in zip(taken, writes, strict=False):
            files.rewrite(fd, data)
        rest = writes[len(taken) :]
        temps = files.write_temps([(dir_fd, data) for dir_fd, _, data, _ in rest], fsync=False)
        if taken:  # fresh temps alone need no flush before their names (data=ordered)
            flush_data(fsync)
        for (_, spare_name_), (dir_fd, name, _, in_place) in zip(taken, writes, strict=False):
            _name(spare, spare_name_, dir_fd, name, in_place=in_place)
        for index, (temp, (dir_fd, name, _, _)) in enumerate(zip(temps, rest, strict=True)):
            try:
                files.commit_temp(dir_fd, temp, name, fsync=False)
            except BaseException:
                for later, (later_fd, _, _, _) in zip(temps[index + 1 :], rest[index + 1 :],
                                                      strict=True):  # fmt: skip
                    files.discard(later_fd, later)
                raise
    finally:
        for fd, _ in taken:
            os.close(fd)


def _name(spare: int, name: str, dir_fd: int, target: str, *, in_place: bool) -> None:
    """Give a written spare its record's name; in place, the old record becomes the spare."""
    if in_place:
        try:
            files.exchange(spare, name, dir_fd, target)
            return
        except OSError as exc:  # no RENAME_EXCHANGE on this file system: replace it instead
            if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
    files.rename_aside(spare, name, dir_fd, target)
