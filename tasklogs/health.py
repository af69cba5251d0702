"""Whether the Task Logs ingester keeps up with the store's event log.

The question is answered from what is on disk and in the cursors, never from a heartbeat: the
oldest line the store wrote that is not ingested yet, found by one small read at each behind
day-file's cursor. A follower (`ingest_tasklogs --follow`) takes a line within a second or
two; a line left for minutes means no follower is running, or it is stuck.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from queues.monitor.lines import read_complete_lines

from .ingest import day_files
from .models import IngestCursor

START_COMMAND = "manage.py ingest_tasklogs --follow"
STALE_SECONDS = 120
_FIRST_LINE_BYTES = 4096  # an event line is a few hundred bytes


@dataclass(frozen=True, kw_only=True)
class IngestLag:
    """Event lines the store wrote that Task Logs has not ingested for too long."""

    oldest_t: int  # unix seconds of the oldest line not ingested
    unread_bytes: int
    day_files: int  # how many day-files have lines not ingested
    command: str = START_COMMAND


def ingest_lag(source: Path, *, now_s: int, stale_seconds: int = STALE_SECONDS) -> IngestLag | None:
    """None while the ingester keeps up (or nothing was logged yet); else what waits, since when.

    A day-file is behind when it is longer than its cursor (or has none, or was replaced: the
    ingester then reads it from the start). Fully ingested day-files cost one stat each."""
    entries = day_files(source)  # none before the store's first event made the directory
    cursors = {c.name: c for c in IngestCursor.objects.filter(name__in=[e.name for e in entries])}
    oldest: int | None = None
    unread = behind = 0
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        cursor = cursors.get(entry.name)
        done = cursor.offset if cursor and cursor.inode == st.st_ino else 0
        if st.st_size <= done:
            continue
        written = _first_line_time(Path(entry.path), done, st.st_mtime)
        if written is None:
            continue  # only a line still being written: nothing is late yet
        behind += 1
        unread += st.st_size - done
        oldest = written if oldest is None else min(oldest, written)
    if oldest is None or now_s - oldest <= stale_seconds:
        return None
    return IngestLag(oldest_t=oldest, unread_bytes=unread, day_files=behind)


def _first_line_time(path: Path, offset: int, mtime: float) -> int | None:
    """When the first line at `offset` was written: its `t`; the file's mtime (later than the
    line, so never an early alarm) when the line is no event line; None when it is unfinished."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # pruned since it was listed
    try:
        read = read_complete_lines(fd, offset, _FIRST_LINE_BYTES)
    finally:
        os.close(fd)
    if not read.lines:
        return int(mtime) if read.cut else None
    try:
        t = orjson.loads(read.lines[: read.lines.index(b"\n")])["t"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return int(mtime)
    return t if isinstance(t, int) and not isinstance(t, bool) else int(mtime)
