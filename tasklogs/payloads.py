"""Opening an archived payload: `<logs>/tasks-payloads/<host>/<queue>/<id>/<file>`, or for a
PostgreSQL queue its store's archive in the database, under the same file names.

The file is the task's posted item (0-posted.item.json once an operator edited it, item.json
before), its progress.jsonl, or the result or error body of one event,
`<attempt>-<event>.<kind>.json` (queues.store.archive). Archives written before each attempt had
its own file hold one result.json and one error.json instead: an event's link falls back to
those when its own file is absent, so the links of old events still open what there is.

Names pass the store's own validation first; then each directory below the archive root is
opened with O_NOFOLLOW relative to its parent, and the file too, so a symlink planted anywhere
in the archive is refused by the kernel instead of being followed to a file outside it.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import BinaryIO

from queues import stores
from queues.auth.access import User
from queues.store.archive import (
    EDITED_ITEM_EVENT,
    PER_EVENT_KINDS,
    POSTED_ITEM,
    TASK_FILES,
    event_file,
)
from queues.store.eventlog import EVENTS
from queues.store.paths import archive_root

from .queries import may_operate, valid_names

MAX_ATTEMPT = 1_000_000  # far above any budget; bounds the name built from the address
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a planted FIFO
_REFUSED = {errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ENXIO}  # absent, or not plain


def file_names(kind: str, attempt: int | None = None, event: str | None = None) -> list[str]:
    """The archive files that may hold this payload, in the order to try them; [] when the
    address names no payload (an unknown kind or event, or an attempt on a task-wide file)."""
    if kind == "item" and event == EDITED_ITEM_EVENT and attempt is not None:
        # an item edited before a retry: its own file only (the posted item is another payload)
        return [event_file(kind, attempt, event)] if 0 <= attempt <= MAX_ATTEMPT else []
    if kind == "item":  # the posted item: kept apart from its first edit on, item.json before
        return [POSTED_ITEM, TASK_FILES[kind]] if attempt is None and event is None else []
    if kind in TASK_FILES:
        return [TASK_FILES[kind]] if attempt is None and event is None else []
    if kind not in PER_EVENT_KINDS:
        return []
    legacy = f"{kind}.json"  # the layout before each attempt had its own
    if attempt is None and event is None:
        return [legacy]
    if attempt is None or event not in EVENTS or not 0 <= attempt <= MAX_ATTEMPT:
        return []
    return [event_file(kind, attempt, event), legacy]


def open_payload(
    user: User,
    logs_dir: Path,
    host: str,
    queue: str,
    task_id: str,
    kind: str,
    *,
    attempt: int | None = None,
    event: str | None = None,
) -> tuple[BinaryIO, str] | None:
    """The archived file opened for reading, and its name; None when the user does not operate
    the queue or it is not an archived file (one answer for both: a 404 must not tell them
    apart)."""
    names = file_names(kind, attempt, event)
    if not names or not valid_names(host, queue, task_id):
        return None
    if not may_operate(user, host, queue):
        return None
    in_database = _from_database(host, queue, task_id, names)
    if in_database is not None:
        return in_database
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
            found = _open_first(fd, names)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in _REFUSED:
            return None
        raise
    if found is None:
        return None
    file_fd, name = found
    if not stat.S_ISREG(os.fstat(file_fd).st_mode):
        os.close(file_fd)
        return None
    os.set_blocking(file_fd, True)
    return os.fdopen(file_fd, "rb"), name


def _from_database(
    host: str, queue: str, task_id: str, names: list[str]
) -> tuple[BinaryIO, str] | None:
    """A PostgreSQL queue's payload, from its store's archive in the database (None for a
    file queue, and for what a queue archived on disk before it changed store)."""
    store = stores.router()
    if not store.is_postgres(host, queue):
        return None
    for name in names:
        body = store.postgres.archived_payload(host, queue, task_id, name)
        if body is not None:
            return io.BytesIO(body), name
    return None


def _open_first(dir_fd: int, names: list[str]) -> tuple[int, str] | None:
    """The first of `names` that exists; only an absent file moves on to the next (a symlink
    in its place is refused, never stepped over)."""
    for name in names:
        try:
            return os.open(name, _FILE, dir_fd=dir_fd), name
        except FileNotFoundError:
            continue
    return None
