"""Opening an archived payload: `<logs>/tasks-payloads/<host>/<queue>/<id>/<kind file>`.

Names pass the store's own validation first; then each directory below the archive root is
opened with O_NOFOLLOW relative to its parent, and the file too, so a symlink planted anywhere
in the archive is refused by the kernel instead of being followed to a file outside it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from queues.access import User
from queues.store.paths import archive_root

from .queries import may_operate, valid_names

# kind -> the archive's file name (tasklogs.md); a download is named "<id>-<file name>".
FILES = {
    "item": "item.json",
    "progress": "progress.jsonl",
    "result": "result.json",
    "error": "error.json",
}
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a planted FIFO
_REFUSED = {errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ENXIO}  # absent, or not plain


def open_payload(
    user: User, logs_dir: Path, host: str, queue: str, task_id: str, kind: str
) -> BinaryIO | None:
    """The archived file opened for reading; None when the user does not operate the queue or
    it is not an archived file (one answer for both: a 404 must not tell them apart)."""
    name = FILES.get(kind)
    if name is None or not valid_names(host, queue, task_id):
        return None
    if not may_operate(user, host, queue):
        return None
    try:
        # The archive root is configuration (it may sit on a symlinked volume); below it, not.
        fd = os.open(archive_root(logs_dir), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for part in (host, queue, task_id):
            parent, fd = fd, -1
            try:
                fd = os.open(part, _DIR, dir_fd=parent)
            finally:
                os.close(parent)
        try:
            file_fd = os.open(name, _FILE, dir_fd=fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in _REFUSED:
            return None
        raise
    if not stat.S_ISREG(os.fstat(file_fd).st_mode):
        os.close(file_fd)
        return None
    os.set_blocking(file_fd, True)
    return os.fdopen(file_fd, "rb")
