"""Failed tasks, read from the event log: each `failed` or `timeout` line of a queue whose
webhook asks for failures becomes a notification.

From the day-files, not from Task Logs' TaskEvent rows: the sweep that sends runs beside the
store, where the day-files are written, while the ingester may run elsewhere, lag, or not run
at all, and a notifier that depended on it would fall silent with it. The cursor (day-file
name, inode, offset) is kept in the database. A chunk's notifications and the cursor's advance
are one transaction, and a notification's source (file, offset and digest of its line) is
unique, so a sweep killed mid-way reads a chunk again without notifying twice, and neither do
two sweeps reading the same lines.

A PostgreSQL queue writes no day-files: its failures are read from the store's events table,
with the same guarantees (store_failures.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

from django.db import transaction

from queues.monitor.lines import read_complete_lines
from queues.store import StoreError
from queues.store.eventlog import whole_line
from queues.store.paths import day_of_file
from queues.stores.router import StoreRouter
from tasklogs.ingest import day_files
from tasklogs.parsing import BadLine, line_digest, parse_line

from .failed import FAILED_EVENTS, Hooks, failure_body
from .models import Kind, LogCursor, Notification, Webhook
from .store_failures import notify_store_failures

CHUNK_BYTES = 1 << 20
logger = logging.getLogger("taskhoster.sweep")


def notify_failures(store: StoreRouter, *, now: dt.datetime) -> int:
    """Make a notification for each new failure, of file queues (the day-files) and of
    PostgreSQL queues (the store's events table); answer how many were made."""
    hooks: Hooks = {
        (hook.queue.host.name, hook.queue.name): hook
        for hook in Webhook.objects.filter(notify_failed=True).select_related("queue__host")
    }
    if not hooks:
        return 0  # and the cursors stay put: nothing before a webhook existed is owed to it
    made = notify_file_failures(store, hooks, now=now)
    try:
        made += notify_store_failures(store, hooks, now=now)
    except StoreError as exc:
        # The PostgreSQL store's database not answering must not hold up the file queues'
        # notifications nor the sends: its rows wait for a pass that reaches it.
        logger.warning("failures of PostgreSQL queues not read: %s", exc.detail)
    return made


def notify_file_failures(store: StoreRouter, hooks: Hooks, *, now: dt.datetime) -> int:
    """A notification for each new failure line of the day-files."""
    # A day-file older than every webhook holds nothing owed to any of them.
    first_day = min(hook.created_at for hook in hooks.values()).astimezone(dt.UTC).date()
    cursors = {cursor.name: cursor for cursor in LogCursor.objects.all()}
    made = 0
    for entry in day_files(Path(store.config.logs_dir) / "tasks"):
        day = day_of_file(entry.name)
        if day is None or day < first_day:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            cursor = cursors.get(entry.name)
            if cursor and cursor.inode == st.st_ino and cursor.offset == st.st_size:
                continue  # nothing new: the common case, answered without opening the file
            made += _read_day_file(Path(entry.path), cursor, hooks, store, now=now)
        except FileNotFoundError:
            continue  # pruned since it was listed
    return made


def _read_day_file(
    path: Path, known: LogCursor | None, hooks: Hooks, store: StoreRouter, *, now: dt.datetime
) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    made = 0
    try:
        cursor = _cursor_for(path.name, os.fstat(fd), known)
        offset = cursor.offset
        while True:
            read = read_complete_lines(fd, offset, CHUNK_BYTES)
            # A line longer than a chunk is no event line of the store's: step past its head
            # (the rest of it reads as a bad line next and is passed over as well).
            end = offset + (CHUNK_BYTES if read.cut else len(read.lines))
            if end == offset:
                return made  # only a line still being written: left for the next pass
            notes = _notifications(read.lines, path.name, offset, hooks, store, now=now)
            with transaction.atomic():
                Notification.objects.bulk_create(notes, ignore_conflicts=True)
                # Only forward: a slower sweep that read the same chunk must not move it back.
                LogCursor.objects.filter(pk=cursor.pk, inode=cursor.inode, offset__lt=end).update(
                    offset=end
                )
            made += len(notes)
            offset = end
    finally:
        os.close(fd)


def _cursor_for(name: str, st: os.stat_result, known: LogCursor | None) -> LogCursor:
    cursor = (
        known
        or LogCursor.objects.get_or_create(name=name, defaults={"inode": st.st_ino, "offset": 0})[0]
    )
    if cursor.inode != st.st_ino or cursor.offset > st.st_size:
        # Replaced or rewritten shorter: read it from the start; lines notified already are
        # known by their source and not notified again.
        LogCursor.objects.filter(pk=cursor.pk).update(inode=st.st_ino, offset=0)
        cursor.inode, cursor.offset = st.st_ino, 0
    return cursor


def _notifications(
    lines: bytes, name: str, offset: int, hooks: Hooks, store: StoreRouter, *, now: dt.datetime
) -> list[Notification]:
    notes = []
    for line in lines.splitlines(keepends=True):
        at, offset = offset, offset + len(line)
        if b'"failed"' not in line:  # a failed or timeout line has the status "failed"
            continue
        text = whole_line(line.rstrip(b"\n"))  # past a torn write's fragment glued before it
        try:
            record = parse_line(text)
        except BadLine:
            continue  # Task Logs' ingester counts and reports it; it is no failure of a task
        hook = hooks.get((record.host, record.queue))
        if record.event not in FAILED_EVENTS or hook is None or record.at < hook.created_at:
            continue
        notes.append(
            Notification(
                webhook=hook,
                kind=Kind.TASK_FAILED,
                task_id=record.task_id,
                source=f"log:{name}:{at}:{line_digest(text)}",
                body=failure_body(
                    store.of,
                    record.host,
                    record.queue,
                    record.task_id,
                    attempts=record.attempts,
                    reason=record.event,
                    at=record.at,
                ),
                next_try_at=now,
                created_at=now,
            )
        )
    return notes
