"""The durable task-event log: one JSON line per transition in a UTC day-file (tasklogs.md)."""

from __future__ import annotations

import datetime as dt
import functools
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from . import files, paths, strays
from .error_line import error_line
from .errors import StorageUnavailable
from .records import Task
from .spool import Spool

EVENTS = frozenset(
    {"posted", "claimed", "progress", "result", "failed", "timeout", "requeue", "fetched"}
    | {"cleaned", "cancelled", "retried", "quarantined"}
    # an operator's: a stuck task's lease ended now, an ended task deleted before its retention
    | {"requeued", "deleted"}
    # a task that waited for others: the last of them finished, and it may be claimed now
    | {"released"}
    # an operator's: a task waiting out its backoff or delay made claimable now
    | {"hastened"}
    # a group's callback, just posted (after its `posted` line): every task of its group ended
    | {"callback"}
    # a claim given back, its attempt uncounted: its caller left before it heard of it
    | {"unclaimed"}
)


@dataclass(frozen=True, kw_only=True)
class Because:
    """Why a line was written, beyond its event: the optional fields of tasklogs.md, each
    written only when set, so every line written before them reads the same.

    `by`: the operator (a user name) whose action it was. `edited`: the operator replaced the
    item before this retry. `lapsed`: the sweep found the task's lease over (its worker went
    silent), as against a worker's own report. (`from`, the task an operator re-posted this one
    from, comes from the record itself: every line of the task carries it.)"""

    by: str | None = None
    edited: bool = False
    lapsed: bool = False


NO_REASON = Because()

# The events that end an attempt with a failure. Their line says why in one line (`reason`):
# the record keeps only the latest attempt's body, and an operator's retry clears even that,
# so each attempt's error lives on in its own line.
FAILURE_EVENTS = frozenset({"failed", "requeue", "timeout"})


def failure_reason(task: Task, event: str, because: Because) -> str:
    """The first line of why this attempt failed; "" for no failure or none known. A lapsed
    lease's requeue has none of its own (its record still holds an earlier attempt's body)."""
    if event not in FAILURE_EVENTS:
        return ""
    if event == "requeue":
        line = "" if because.lapsed else error_line(task.last_error)
    else:
        line = error_line(task.result) or (task.error or "")
    return line.replace("\0", "\N{REPLACEMENT CHARACTER}")  # no text column holds a NUL


def payload_size(value: Any) -> int:
    return 0 if value is None else len(orjson.dumps(value))


def iso_ms(now: int) -> str:
    return _iso_second(now // 1000) + f"{now % 1000:03d}Z"


@functools.lru_cache(maxsize=4)
def _iso_second(t: int) -> str:
    """The line's second, formatted once: every event in that second shares it (strftime was
    a visible share of a gunicorn worker's time under load)."""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.")


@functools.lru_cache(maxsize=4)
def _day_of(t: int) -> dt.date:
    """The UTC day of a line's second, worked out once per second as _iso_second is: every
    line written looks its day-file up by it."""
    return dt.datetime.fromtimestamp(t, dt.UTC).date()


def event_line(
    task: Task,
    event: str,
    *,
    now: int,
    worker: str | None,
    archived: list[str],
    because: Because = NO_REASON,
) -> dict[str, Any]:
    """The line, exactly tasklogs.md's fields, for `task` as it is after the transition."""
    line = {
        "t": now // 1000,
        "at": iso_ms(now),
        "host": task.host,
        "queue": task.queue,
        "id": task.id,
        "event": event,
        "status": task.status.value,
        "attempts": task.attempts,
        "worker": worker,
        "bytes": {
            "item": payload_size(task.item),
            "progress": payload_size(task.progress),
            "result": payload_size(task.result),
            "error": payload_size(task.error),
        },
        "archived": archived,
    }
    by = because.by
    if by is None and event == "cancelled":
        by = task.cancel_requested_by  # the end of a stop an operator asked for while it ran
    if by is not None:
        line["by"] = by
    if task.reposted_from is not None:
        line["from"] = task.reposted_from
    if because.edited:
        line["edited"] = True
    if because.lapsed:
        line["lapsed"] = True
    reason = failure_reason(task, event, because)
    if reason:
        line["reason"] = reason
    return line


class _DayFile:
    """The open descriptor of the newest day-file, and how many writes are using it.
    `torn`: the file ends in a fragment (a short write, this process's or a dead one's)."""

    __slots__ = ("day", "dev", "fd", "ino", "path", "retired", "torn", "users")

    def __init__(self, day: dt.date, fd: int, path: str, *, torn: bool) -> None:
        self.day, self.fd, self.users, self.retired, self.torn = day, fd, 0, False, torn
        # its file system, asked once: a syncfs store's every append asks whether it is the
        # items' (files.append)
        opened = os.fstat(fd)
        self.path, self.dev, self.ino = path, opened.st_dev, opened.st_ino

    def still_named(self) -> bool:
        """Whether its path still names the file the descriptor holds: not once the file was
        moved or deleted (by hand, by a rotation), nor once the logs disk was mounted again
        after an error (the descriptor's file system is then the dead one, read-only)."""
        try:
            named = os.stat(self.path)
        except OSError:
            return False
        return (named.st_dev, named.st_ino) == (self.dev, self.ino)


def _open_day_file(tasks_dir: files.LogsTopDir, day: dt.date) -> _DayFile:
    path = paths.day_file(Path(tasks_dir.path).parent, day)
    with files.storage_errors("the event log"):
        try:
            fd = _open_regular(path)
        except FileNotFoundError:  # tasks/ could not be made when the store opened, or is gone
            tasks_dir.make()
            fd = _open_regular(path)
    try:
        torn = files.ends_mid_line(fd)
    except OSError:
        torn = True  # not known: an empty line costs readers nothing, a glued one a line
    return _DayFile(day, fd, str(path), torn=torn)


def _open_regular(path: Path) -> int:
    """The day-file, open to append. Anything else planted under its name (a FIFO, whose
    buffer would take lines nobody reads and then block every append; a directory; a
    symlink) is renamed aside first, to a name readers pass over (`<day>.jsonl.quarantined-<ms>`,
    strays.py)."""
    for _ in range(2):
        try:
            fd = files.open_append(str(path))
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) or not strays.is_stray(exc):
                raise
        else:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return fd
            os.close(fd)
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            strays.set_aside(parent, path.name, parent, f"{path.name}.quarantined-",
                             f"tasks/{path.name}")  # fmt: skip
        finally:
            os.close(parent)
    raise StorageUnavailable("The day-file keeps being replaced.")


# Every line the store writes starts so (orjson keeps the key order, and a name inside a JSON
# string has its quotes escaped): where it appears past a line's start, a fragment of an
# earlier write lies before it.
LINE_START = b'{"t":'

# how far back a drain that finds a dead drainer's spool file looks for its lines (spool.py)
_RECHECK_BYTES = 16 << 20
# how many spool files an append drains before its own line (the sweep drains them all)
_DRAIN_PER_APPEND = 32


def whole_line(line: bytes) -> bytes:
    """A day-file line (without its newline) resynchronised: a line that a torn write glued to
    the end of a fragment (a write cut short by a full disk, where the fragment could not be
    cut back) is read from its own start. A fragment on a line of its own comes back as it is,
    for the reader's parser to refuse and pass over."""
    start = line.rfind(LINE_START)
    return line[start:] if start > 0 else line


class LinesRefused(StorageUnavailable):
    """The event log refused an append (and the spool too, where the change may spool). The
    first `standing` of its lines were written whole before the disk filled and stay in the
    day-file, where a reader may have read them already: their changes stand."""

    def __init__(self, message: str, *, standing: int) -> None:
        super().__init__(message)
        self.standing = standing


class EventLog:
    """Appends to `<logs>/tasks/YYYY-MM-DD.jsonl`.

    Only the newest day's descriptor stays open: a process that kept one per day it ever wrote
    held on to pruned day-files (their space freed only at its restart). A line stamped with an
    earlier day that arrives after the rollover (a slow thread) opens that day-file for itself.
    A descriptor is closed only once no write is using it, never under one. Before each append
    the day-file's path is checked to still name the open file (_DayFile.still_named), and it is
    opened again when it does not: a file moved away, or a logs disk mounted again after it
    failed, would otherwise take every later line of the day where nobody reads it."""

    def __init__(self, logs_dir: Path, *, fsync: files.Durable, spool: Spool | None = None) -> None:
        self.logs_dir, self.fsync, self.spool = logs_dir, fsync, spool
        self._current: _DayFile | None = None
        self._lock = threading.Lock()
        # whether the spool may hold lines: a restart may find some of a process that died
        # before it drained them, so the first append looks once; after that only a failure
        # this process saw sets it again (no extra system call per append otherwise)
        self.spool_dirty = spool is not None
        # made now if it can be (reads need no log); once seen, never made again (LogsTopDir)
        self._tasks_dir = files.LogsTopDir(logs_dir / "tasks")

    def append(
        self,
        task: Task,
        event: str,
        *,
        now: int,
        worker: str | None = None,
        archived: list[str] | None = None,
        because: Because = NO_REASON,
        flush: bool = True,
    ) -> dict[str, Any]:
        """One change's line (`flush` False: not flushed, for a change that promises nothing)."""
        assert event in EVENTS, event
        line = event_line(
            task, event, now=now, worker=worker, archived=archived or [], because=because
        )
        self._write(_day_of(line["t"]), orjson.dumps(line) + b"\n", flush=flush)
        return line

    def append_many(
        self,
        entries: list[tuple[Task, str, str | None, list[str]]],
        *,
        now: int,
        may_spool: bool = True,
        flush: bool = True,
    ) -> None:
        """The lines of a batch's transitions (task, event, worker, archived), all stamped `now`,
        in one write and one flush: a batch shares the event log's fsync (group commit).
        `may_spool`: False for a change that is undone when its lines fail (a claim); `flush`:
        False for changes that promise nothing a crash could break (a claim, store.md)."""
        if not entries:
            return
        data = b"".join(
            orjson.dumps(event_line(task, event, now=now, worker=worker, archived=archived)) + b"\n"
            for task, event, worker, archived in entries
        )
        assert all(event in EVENTS for _, event, _, _ in entries)
        # one write on the O_APPEND descriptor: another process's lines never land inside it
        self._write(_day_of(now // 1000), data, may_spool=may_spool, flush=flush)

    def quarantined(self, host: str, queue: str, task_id: str, *, now: int) -> None:
        """A corrupt file moved aside: there is no record, so the line says only what is known."""
        self.write_line(
            {
                "t": now // 1000,
                "at": iso_ms(now),
                "host": host,
                "queue": queue,
                "id": task_id,
                "event": "quarantined",
                "status": "quarantined",
                "attempts": 0,
                "worker": None,
                "bytes": {"item": 0, "progress": 0, "result": 0, "error": 0},
                "archived": [],
            }
        )

    def write_line(self, line: dict[str, Any]) -> None:
        self._write(_day_of(line["t"]), orjson.dumps(line) + b"\n")

    def _write(
        self, day: dt.date, data: bytes, *, may_spool: bool = True, flush: bool = True
    ) -> None:
        """Append the lines of a change already durable in the items store. If the logs disk
        refuses them they are spooled on the items disk (spool.py) and the change stands; only
        when the spool refuses too does this raise StorageUnavailable (LinesRefused where some
        lines were written whole before the disk filled: those stand). Lines spooled earlier
        are drained first, so that a task's lines keep their order where they can."""
        if self.spool_dirty:  # a few files per append: a long outage's spool is not one wait
            self.drain_spool(limit=_DRAIN_PER_APPEND)
        try:
            self._append(day, data, flush=flush)
        except files.ClosingFlushFailed as exc:
            raise LinesRefused(exc.detail, standing=0) from exc  # the change fails unflushed
        except StorageUnavailable as exc:
            standing = exc.whole if isinstance(exc, files.TornWrite) else 0
            if self.spool is None or not may_spool:
                raise LinesRefused(exc.detail, standing=data[:standing].count(b"\n")) from exc
            try:
                # the lines written whole are not written twice; nor, once found, flushed ones
                self.spool.keep(data[standing:], maybe_written=isinstance(exc, files.FlushFailed))
            except StorageUnavailable as refused:  # the items disk refuses too: then a 503
                raise LinesRefused(
                    refused.detail, standing=data[:standing].count(b"\n")
                ) from refused
            self.spool_dirty = True

    def drain_spool(self, *, limit: int | None = None) -> bool:
        """Append the spooled lines to their day-files (the sweep's every pass, and the next
        appends after this process spooled, `limit` files each): whether none is left."""
        if self.spool is None:
            return True
        self.spool_dirty = False  # before the listing: a line spooled meanwhile sets it again
        drained = self.spool.drain(self._append_spooled, self._holds, limit=limit)
        if not drained:
            self.spool_dirty = True
        return drained

    def _append_spooled(self, data: bytes) -> None:
        first = orjson.loads(data[: data.index(b"\n")])  # every line of one append shares its day
        self._append(_day_of(first["t"]), data)

    def _holds(self, data: bytes) -> bool:
        """Whether the day-file of `data` ends with it somewhere in its last _RECHECK_BYTES
        (the lines carry their task, event and millisecond: the same bytes are the same lines)."""
        first = orjson.loads(data[: data.index(b"\n")])
        path = paths.day_file(self.logs_dir, _day_of(first["t"]))
        try:
            with open(path, "rb") as day_file:
                # What it shows is what the disk keeps only once flushed: a disk that failed
                # (ext4 read-only after an error) shows bytes it loses when mounted again,
                # and refuses the flush; then the line is looked for at a later drain.
                try:
                    os.fdatasync(day_file.fileno())
                except OSError as exc:
                    raise StorageUnavailable("The logs disk does not flush.") from exc
                size = day_file.seek(0, os.SEEK_END)
                day_file.seek(max(0, size - _RECHECK_BYTES - len(data)))
                return data in day_file.read()
        except FileNotFoundError:
            return False

    def _append(self, day: dt.date, data: bytes, *, flush: bool = True) -> None:
        """Append whole lines to the day's file. After a fragment that could not be cut back
        (files.TornWrite), the next write starts with a newline: the fragment is then a torn
        line of its own, which readers pass over, and never swallows the line after it. A
        TornWrite raised here counts `whole` in bytes of `data` (without that newline)."""
        with self._day_fd(day) as day_file:
            prefix = b"\n" if day_file.torn else b""
            try:
                files.append(day_file.fd, prefix + data, fsync=self.fsync if flush else False,
                             dev=day_file.dev)  # fmt: skip
            except files.TornWrite as exc:
                ends_a_line = exc.cut_back and (exc.whole > 0 or not day_file.torn)
                day_file.torn = not ends_a_line
                raise files.TornWrite(
                    cut_back=exc.cut_back, whole=max(0, exc.whole - len(prefix))
                ) from exc
            day_file.torn = False

    @contextmanager
    def _day_fd(self, day: dt.date) -> Iterator[_DayFile]:
        """The day's file, its descriptor open for the block."""
        with self._lock:
            current = self._current
            # one stat an append: a line written to a file its path no longer names is lost
            if current is not None and day == current.day and not current.still_named():
                self._retire(current)
                current = None
            if current is None or day > current.day:  # the first line, or the day rolled over
                opened = _open_day_file(self._tasks_dir, day)
                if current is not None:
                    self._retire(current)
                current = self._current = opened
            if day == current.day:
                current.users += 1
            else:
                current = None
        if current is None:  # a line for an earlier day: its file is opened for this line only
            earlier = _open_day_file(self._tasks_dir, day)
            try:
                yield earlier
            finally:
                os.close(earlier.fd)
            return
        try:
            yield current
        finally:
            with self._lock:
                current.users -= 1
                if current.retired and current.users == 0:
                    os.close(current.fd)

    def _retire(self, day_file: _DayFile) -> None:
        """No longer the newest: closed now, or by its last writer. Call with the lock held."""
        day_file.retired = True
        if self._current is day_file:
            self._current = None
        if day_file.users == 0:
            os.close(day_file.fd)

    def prune(self, *, now: int, retain_days: int) -> int:
        """Delete day-files (and archived payload folders) older than `retain_days`."""
        cutoff = dt.datetime.fromtimestamp(now / 1000, dt.UTC).date() - dt.timedelta(retain_days)
        removed = 0
        try:
            listing = list(os.scandir(self.logs_dir / "tasks"))
        except FileNotFoundError:
            # no line yet, or the logs disk not mounted now (its mount point empty): nothing
            # to prune until it is back; the archive is on the same disk
            return 0
        for entry in listing:
            day = paths.day_of_file(entry.name)
            if day is not None and day < cutoff and entry.is_file(follow_symlinks=False):
                with self._lock:
                    if self._current is not None and self._current.day == day:
                        self._retire(self._current)  # a clock far ahead, or no retention
                try:
                    files.remove_file(entry.path)
                except FileNotFoundError:
                    continue  # another sweep (another process's) pruned it since the listing
                removed += 1
        return removed + self._prune_archive(cutoff)

    def _prune_archive(self, cutoff: dt.date) -> int:
        limit = dt.datetime.combine(cutoff, dt.time(), dt.UTC).timestamp()
        root = paths.archive_root(self.logs_dir)
        removed = 0
        for task_dir in root.glob("*/*/*") if root.is_dir() else ():
            if task_dir.is_symlink() or not task_dir.is_dir():
                continue
            try:
                newest = max((_mtime(f) for f in task_dir.iterdir()), default=0.0)
                if newest < limit:
                    # the folder is ours, and rmtree never follows symlinks
                    shutil.rmtree(task_dir, onerror=_gone_is_fine)
                    removed += 1
            except FileNotFoundError:
                continue  # pruned by another sweep since the listing
        return removed

    def close(self) -> None:
        with self._lock:
            if self._current is not None:
                self._retire(self._current)


def _mtime(path: Path) -> float:
    """A file's mtime; 0 for one gone since its folder was listed (it holds up nothing)."""
    try:
        return path.lstat().st_mtime
    except FileNotFoundError:
        return 0.0


def _gone_is_fine(function: Any, path: str, exc_info: Any) -> None:
    """rmtree's error hook: an entry removed by someone else meanwhile is what it wanted."""
    if not issubclass(exc_info[0], FileNotFoundError):
        raise exc_info[1]
