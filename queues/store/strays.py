"""What the store meets where one of its own files or directories belongs and that is not one:
a FIFO, a socket, a device, a symlink, a directory where a file belongs (a task's waiters, a
group's count or owner, a key, post-seq, flow.json), or anything but a directory where one
belongs (a group, its members/). Only regular files are the store's files, as only regular
files are tasks: such an entry is never read through, never waited on, and never stops the
verb or the sweep pass that met it. It is moved aside to the queue's quarantine/, as
`<name>.<where>.<ms since the epoch>` (where: the directory it lay in, `/` written `-`, left
out for one of the queue's own directories, e.g. a FIFO in place of groups/), and
logged once, with the move (a warning of the `taskhoster.store` logger); the verb or the pass
then goes on as if the name were free. Nothing in quarantine/ is read again.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
import time
from collections.abc import Callable

from . import files, paths
from .errors import StorageUnavailable
from .paths import QueueDirs

logger = logging.getLogger("taskhoster.store")

Kind = Callable[[int], bool]  # stat.S_ISREG, stat.S_ISDIR: what the store's own entry is

# what opening a name meets when it is no regular file (files.NotRegularFile is ENXIO), or no
# directory where one is opened as one
_NOT_OURS = {errno.ELOOP, errno.EISDIR, errno.ENOTDIR, errno.ENXIO}


def is_stray(exc: OSError) -> bool:
    """Whether an open's OSError says the name is not the kind of entry the store makes there
    (a symlink, a FIFO or device, a directory for a file or a file for a directory)."""
    return exc.errno in _NOT_OURS


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a file"),
    ):
        if test(mode):
            return name
    return "an entry of an unknown kind"


def move_aside(
    qd: QueueDirs, dir_fd: int, name: str, where: str, *, wanted: Kind = stat.S_ISREG
) -> bool:
    """Move the entry `name` of the directory `dir_fd` (the queue's `where`, for the log and
    the new name) to the queue's quarantine/ and log it, unless it is of the `wanted` kind
    (a regular file, or S_ISDIR) by now; False if it was not moved (gone, or the store's own
    since: another process moved the planted one and made its own). StorageUnavailable when
    the disk refuses the move (it is met again later)."""
    at = f"{where.replace('/', '-')}." if where else ""  # "": the queue's directory itself
    label = f"{qd.host}/{qd.queue}: {where}/{name}" if where else f"{qd.host}/{qd.queue}: {name}"
    into = qd.fd(paths.QUARANTINE_DIR)
    return set_aside(dir_fd, name, into, f"{name}.{at}", label, wanted=wanted)


def set_aside(
    dir_fd: int, name: str, into_fd: int, prefix: str, label: str, *, wanted: Kind = stat.S_ISREG
) -> bool:
    """Move the entry `name` of `dir_fd` into the directory `into_fd` as `prefix` and the time
    in ms, and log it as `label`, unless it is of the `wanted` kind; whether it was moved.
    StorageUnavailable when the disk refuses the move."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return False
    if wanted(mode):
        return False
    kind = _kind(mode)
    aside = f"{prefix}{time.time_ns() // 1_000_000}"
    try:
        try:
            files.rename_noreplace(dir_fd, name, into_fd, aside)
        except FileExistsError:  # one of that name moved aside in the same millisecond
            aside += "-" + secrets.token_hex(3)
            files.rename_noreplace(dir_fd, name, into_fd, aside)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageUnavailable(f"The store could not move {label} aside.") from exc
    logger.warning("%s is %s, not one of the store's own: moved aside as %s", label, kind, aside)
    return True
