"""Reading the store's day-files into TaskEvent: incremental, complete lines only, idempotent.

A cursor per day-file (name, inode, byte offset) says where the last run stopped. A run reads
what was appended since, up to the last newline (a line still being written is left for the
next run), and stores each chunk with the cursor's advance in one transaction. Two runs at once
may read the same lines; the unique key (file, offset, digest) and `ignore_conflicts` store
each line once, and the cursor only ever moves forward.

Each chunk's transaction first locks its day-file's cursor row: a peer reading the same lines
waits for this chunk, then finds the cursor past them and only counts them; and a chunk that
starts where no line of its file is stored is copied straight into the table (inserting.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection, transaction

from queues.monitor.lines import read_complete_lines
from queues.store.paths import day_of_file

from .inserting import Row, copy_new_rows
from .lost_tail import withdraw_lost_tail
from .models import IngestCursor
from .parsing import BadLine, after_torn_prefix, line_digest, parse_line

CHUNK_BYTES = 4 << 20  # about 15,000 lines: one transaction, short enough not to starve a peer
MAX_BAD_SHOWN = 20

Progress = Callable[[int], None]  # called with the bytes just read
Parsed = tuple[list[Row], "IngestReport"]
Block = tuple[int, bytes, int]


@dataclass(frozen=True, kw_only=True)
class BadLineSeen:
    file: str
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}: {self.reason}"


@dataclass(kw_only=True)
class IngestReport:
    files: int = 0
    lines: int = 0  # complete lines read, good and bad (a line stored by a peer counts too)
    bad: int = 0
    bytes_read: int = 0
    store_rows: int = 0  # rows copied from a PostgreSQL store's events table (store_events.py)
    bad_lines: list[BadLineSeen] = field(default_factory=list)  # the first MAX_BAD_SHOWN

    def add(self, other: IngestReport) -> None:
        self.files += other.files
        self.lines += other.lines
        self.bad += other.bad
        self.bytes_read += other.bytes_read
        self.store_rows += other.store_rows
        self.bad_lines.extend(other.bad_lines[: MAX_BAD_SHOWN - len(self.bad_lines)])


def day_files(source: Path) -> list[os.DirEntry[str]]:
    """The day-files of `source`, oldest first (other names are not the store's and are left).
    None while `source` is missing: no line written yet, or the logs disk not mounted now (its
    mount point empty, between an unmount and the next mount): a wait, not an error."""
    try:
        listing = os.scandir(source)
    except FileNotFoundError:
        return []
    with listing as entries:
        found = [e for e in entries if day_of_file(e.name) and e.is_file(follow_symlinks=False)]
    return sorted(found, key=lambda e: e.name)


def pending_bytes(source: Path) -> int:
    """How much of `source` is not read yet: the size of a backfill, for the progress bar."""
    cursors = {c.name: c for c in IngestCursor.objects.all()}
    total = 0
    for entry in day_files(source):
        st = entry.stat(follow_symlinks=False)
        cursor = cursors.get(entry.name)
        done = cursor.offset if cursor and cursor.inode == st.st_ino else 0
        total += max(st.st_size - done, 0)
    return total


def ingest_directory(source: Path, *, progress: Progress | None = None) -> IngestReport:
    """Ingest every day-file of `source`. Day-files pruned from it keep their events here."""
    report = IngestReport()
    cursors = {c.name: c for c in IngestCursor.objects.all()}
    for entry in day_files(source):
        # a day-file pruned (or moved away) since the listing: its lines were stored before
        with contextlib.suppress(FileNotFoundError):
            st = entry.stat(follow_symlinks=False)
            cursor = cursors.get(entry.name)
            if cursor and cursor.inode == st.st_ino and cursor.offset == st.st_size:
                continue  # nothing new: the common case under --follow, answered without reading
            report.add(ingest_day_file(Path(entry.path), cursor, progress=progress))
    return report


def ingest_day_file(
    path: Path, cursor: IngestCursor | None = None, *, progress: Progress | None = None
) -> IngestReport:
    """Store the complete lines of `path` past its cursor. Idempotent: a line is stored once."""
    report = IngestReport(files=1)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        cursor = _cursor_for(path.name, st.st_ino, cursor)
        withdraw_lost_tail(fd, path.name, cursor)
        if cursor.offset > st.st_size:
            # rewritten shorter in place (e.g. rsync --inplace), no row of it left to agree
            # with: read it from the start, or we would begin in the middle of a line
            _restart(cursor, st.st_ino)
        to_db_time = db_time()
        for start, block, end in _blocks(fd, cursor.offset, report, path.name):
            report.add(_store(block, path.name, start, end, cursor, to_db_time))
            report.bytes_read += end - start
            if progress:
                progress(end - start)
    finally:
        os.close(fd)
    return report


def _blocks(fd: int, offset: int, report: IngestReport, name: str) -> Iterator[Block]:
    """(start, complete lines, where the next block starts) from `offset` to the last newline."""
    while True:
        read = read_complete_lines(fd, offset, CHUNK_BYTES)
        block, end = read.lines, len(read.lines)
        if read.cut:
            block, end = b"", _skip_overlong(fd, offset, report, name)
        if not end:
            return  # only a line still being written: left for the next run
        yield offset, block, offset + end
        offset += end


def _cursor_for(name: str, inode: int, known: IngestCursor | None) -> IngestCursor:
    cursor = (
        known
        or IngestCursor.objects.get_or_create(name=name, defaults={"inode": inode, "offset": 0})[0]
    )
    if cursor.inode != inode:
        # The day-file was replaced (a new inode, e.g. re-copied from the server): read it from
        # the start. Lines already stored are recognised by their key and not stored again.
        _restart(cursor, inode)
    return cursor


def _restart(cursor: IngestCursor, inode: int) -> None:
    IngestCursor.objects.filter(pk=cursor.pk).update(inode=inode, offset=0)
    cursor.inode, cursor.offset = inode, 0


def _store(
    block: bytes,
    name: str,
    start: int,
    end: int,
    cursor: IngestCursor,
    to_db_time: Callable[[dt.datetime], object],
) -> IngestReport:
    """Parse and store the complete lines `block` (bytes start to end of `name`) and advance the
    cursor, in one transaction; what was found in them."""
    part = IngestReport()
    with transaction.atomic():
        # Held to the commit: a peer storing the same lines waits here for this chunk.
        locked = IngestCursor.objects.select_for_update().filter(pk=cursor.pk)
        inode, offset = locked.values_list("inode", "offset").get()
        if inode == cursor.inode and offset >= end:
            # A peer stored these lines while this run read them: count them, store nothing.
            _parse(block, name, start, to_db_time, part)
            cursor.offset = offset
            return part
        copy_new_rows(_rows(block, name, start, to_db_time, part), file=name, first_offset=start)
        # Only forward: a slower peer that read the same chunk must not move the cursor back.
        locked.filter(inode=cursor.inode, offset__lt=end).update(offset=end)
    cursor.offset = max(cursor.offset, end)
    return part


def db_time() -> Callable[[dt.datetime], object]:
    """The backend's own conversion of a datetime, or on SQLite the same result in one call:
    Django stores an aware datetime there as the text of its naive UTC value (the connection's
    time zone is UTC), and its general converter was a quarter of a backfill's time."""
    if connection.vendor == "sqlite" and connection.timezone_name == "UTC":
        # A parsed line's time is always UTC, so its ISO text ends in "+00:00": cut, it is the
        # naive value's text, without building a second datetime (half the cost).
        return lambda at: at.isoformat(" ")[:-6]
    return connection.ops.adapt_datetimefield_value


def _parse(
    chunk: bytes,
    name: str,
    base: int,
    to_db_time: Callable[[dt.datetime], object],
    report: IngestReport | None = None,
) -> Parsed:
    """The rows of a chunk of complete lines, and what was found in it (added to `report`)."""
    report = IngestReport() if report is None else report
    return list(_rows(chunk, name, base, to_db_time, report)), report


def _rows(
    chunk: bytes,
    name: str,
    base: int,
    to_db_time: Callable[[dt.datetime], object],
    report: IngestReport,
) -> Iterator[Row]:
    """The row of each good line of a chunk of complete lines, counting every line in `report`.

    A generator, so that PostgreSQL stores each row while the next lines are parsed. (Parsing
    the next chunk in a thread while the database stores this one was tried on SQLite: the GIL
    contention made it 10 to 20% slower, not faster.)"""
    offset = base
    for line in chunk.split(b"\n")[:-1]:  # the chunk ends in a newline: the last piece is empty
        report.lines += 1
        start, offset = offset, offset + len(line) + 1
        try:
            r = parse_line(line)
        except BadLine as exc:
            glued = after_torn_prefix(line)
            if glued is None:
                _bad(report, name, start, str(exc))
                continue
            # A torn fragment, then a whole line: the fragment is bad, the line is stored at
            # its own offset, as if the fragment had ended in a newline.
            cut, r = glued
            _bad(report, name, start, f"a torn line ({cut} bytes) before the line at {start + cut}")
            report.lines += 1
            start, line = start + cut, line[cut:]
        # In COLUMNS' order.
        yield (
            r.t,
            to_db_time(r.at),
            r.host,
            r.queue,
            r.task_id,
            r.event,
            r.status,
            r.attempts,
            r.worker or "",
            r.bytes_item,
            r.bytes_progress,
            r.bytes_result,
            r.bytes_error,
            ",".join(r.archived),
            r.by or "",
            r.origin or "",
            r.edited,
            r.lapsed,
            r.reason,
            name,
            start,
            line_digest(line),
        )


def _bad(report: IngestReport, name: str, offset: int, reason: str) -> None:
    report.bad += 1
    if len(report.bad_lines) < MAX_BAD_SHOWN:
        report.bad_lines.append(BadLineSeen(file=name, offset=offset, reason=reason))


def _skip_overlong(fd: int, offset: int, report: IngestReport, name: str) -> int:
    """A line longer than a chunk is no event line: count it bad and step past its newline."""
    end = CHUNK_BYTES
    while chunk := os.pread(fd, CHUNK_BYTES, offset + end):
        newline = chunk.find(b"\n")
        if newline >= 0:
            report.lines += 1
            _bad(report, name, offset, "a line longer than any event line")
            return end + newline + 1
        end += len(chunk)
    return 0  # still being written, or a torn tail: the next run looks again
