"""Event lines the logs disk refused, kept on the items disk until they can be appended.

A change is durable in the items store before its line is written (store.md's order). When the
day-file append then fails with a storage error (the logs disk full, read-only, failing), the
exact bytes of the append go into one file of `<items>/.unlogged/` (temp-then-rename), and the
change is acknowledged: its line is late, never lost. The spool is drained into the day-file
in name order (the time it was spooled) by the sweep's every pass and by the next append of a
process that spooled, each file unlinked only after its lines are appended.

One drainer at a time: the drain holds a non-blocking flock on the spool directory, so two
processes never append the same file; a crashed drainer's lock goes with it. A crash between a
file's append and its unlink leaves it `.draining`; the next drain appends it only if its bytes
are not in the day-file's tail already (EventLog.holds), so a line is not repeated unless the
day-file has grown by more than that tail since.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path

from . import files, strays
from .errors import StorageUnavailable

SPOOL_DIR = ".unlogged"  # not a valid host name: no listing of queues ever sees it
SUFFIX = ".jsonl"
DRAINING = ".draining"  # being appended now, or by a drainer that died before its unlink
QUARANTINE_DIR = "quarantine"  # what was planted among the spool files (strays.py)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Spool:
    def __init__(self, items_dir: Path, *, fsync: files.Durable) -> None:
        self.items_dir, self.fsync = items_dir, fsync
        self._count = itertools.count()

    def keep(self, data: bytes, *, maybe_written: bool = False) -> None:
        """Spool the bytes of one append durably; StorageUnavailable if the items disk refuses
        too (only then is the change answered 503). `maybe_written`: the append may be in the
        day-file (its flush failed: files.FlushFailed), so it is kept as `.draining`, and its
        drain looks for it in the day-file first, as for a drainer that died."""
        name = self._new_name()
        if maybe_written:
            name = _spooled_at(name) + DRAINING
        with files.storage_errors("the spool of unwritten log lines"):
            fd = self._open(create=True)
            try:
                files.write_durable(fd, name, data, fsync=self.fsync)
            finally:
                os.close(fd)

    def drain(
        self,
        append: Callable[[bytes], None],
        appended: Callable[[bytes], bool],
        *,
        limit: int | None = None,
    ) -> bool:
        """Append the spooled files, oldest first (at most `limit` of them), with `append`
        (which raises on a storage error), unlinking each once appended. Whether the spool is
        now empty; False also when files are left over the limit, another process is draining
        it, or a disk still refuses.

        Each file is renamed to `.draining` before its append: one found so at the start was
        left by a drainer that died after the rename, and `appended` (its bytes are in the
        day-file already) says whether to append it again."""
        try:
            fd = self._open(create=False)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # another drainer holds it: its lines are on their way
            names = []
            for entry in os.scandir(fd):
                if not entry.name.endswith((SUFFIX, DRAINING)):
                    continue
                if entry.is_file(follow_symlinks=False):
                    names.append(entry.name)
                else:  # a FIFO or a directory under a spool file's name: never read
                    self._set_aside(fd, entry.name)
            names.sort(key=_spooled_at)
            for name in names[:limit]:
                draining = _spooled_at(name) + DRAINING
                if name != draining:
                    files.rename_aside(fd, name, fd, draining)
                data = files.read_at(fd, draining)
                if name == draining and appended(data):
                    files.unlink(fd, draining, fsync=self.fsync)
                    continue
                try:
                    append(data)
                except StorageUnavailable:
                    if name != draining:  # not appended: no later drain need search for it
                        with contextlib.suppress(OSError, StorageUnavailable):
                            files.rename_aside(fd, draining, fd, name)
                    raise
                files.unlink(fd, draining, fsync=self.fsync)
            return limit is None or len(names) <= limit
        except (OSError, StorageUnavailable):
            return False  # kept for the next drain
        finally:
            os.close(fd)

    def _set_aside(self, fd: int, name: str) -> None:
        """Move a planted entry to the spool's quarantine/ (strays.py), logged once."""
        files.make_dir(fd, QUARANTINE_DIR, fsync=False)
        into = os.open(QUARANTINE_DIR, _DIR_FLAGS, dir_fd=fd)
        try:
            strays.set_aside(fd, name, into, f"{name}.", f"{SPOOL_DIR}/{name}")
        finally:
            os.close(into)

    def _open(self, *, create: bool) -> int:
        path = self.items_dir / SPOOL_DIR
        if create:
            with contextlib.suppress(FileExistsError):
                path.mkdir(mode=files.DIR_MODE)
                if self.fsync:  # the directory's entry, so that a power cut keeps the spool
                    parent = os.open(self.items_dir, _DIR_FLAGS)
                    try:
                        os.fsync(parent)
                    finally:
                        os.close(parent)
        return os.open(path, _DIR_FLAGS)

    def _new_name(self) -> str:
        # the time first, so that name order is spooling order; pid and count keep it unique
        return f"{time.time_ns():020d}-{os.getpid()}-{next(self._count):08d}{SUFFIX}"


def _spooled_at(name: str) -> str:
    """A spool file's name without its suffix: the order it was spooled in."""
    return name.rsplit(".", 1)[0]
