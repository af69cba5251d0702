"""The durable task-event log: one JSON line per transition in a UTC day-file (tasklogs.md)."""

from __future__ import annotations

import datetime as dt
import functools
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import orjson

from . import files, paths
from .records import Task

EVENTS = frozenset(
    {"posted", "claimed", "progress", "result", "failed", "timeout", "requeue", "fetched"}
    | {"cleaned", "cancelled", "retried", "quarantined"}
)


def payload_size(value: Any) -> int:
    return 0 if value is None else len(orjson.dumps(value))


def iso_ms(now: int) -> str:
    return _iso_second(now // 1000) + f"{now % 1000:03d}Z"


@functools.lru_cache(maxsize=4)
def _iso_second(t: int) -> str:
    """The line's second, formatted once: every event in that second shares it (strftime was
    a visible share of a gunicorn worker's time under load)."""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.")


def event_line(
    task: Task, event: str, *, now: int, worker: str | None, archived: list[str]
) -> dict[str, Any]:
    """The line, exactly tasklogs.md's fields, for `task` as it is after the transition."""
    return {
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


class EventLog:
    """Appends to `<logs>/tasks/YYYY-MM-DD.jsonl`; one descriptor per day-file, kept open."""

    def __init__(self, logs_dir: Path, *, fsync: bool) -> None:
        self.logs_dir, self.fsync = logs_dir, fsync
        self._fds: dict[dt.date, int] = {}
        self._lock = threading.Lock()
        (logs_dir / "tasks").mkdir(parents=True, exist_ok=True)

    def append(
        self,
        task: Task,
        event: str,
        *,
        now: int,
        worker: str | None = None,
        archived: list[str] | None = None,
    ) -> dict[str, Any]:
        assert event in EVENTS, event
        line = event_line(task, event, now=now, worker=worker, archived=archived or [])
        self.write_line(line)
        return line

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
        data = orjson.dumps(line) + b"\n"
        files.append(
            self._fd_for(dt.datetime.fromtimestamp(line["t"], dt.UTC).date()),
            data,
            fsync=self.fsync,
        )

    def _fd_for(self, day: dt.date) -> int:
        with self._lock:
            fd = self._fds.get(day)
            if fd is None:
                fd = self._fds[day] = files.open_append(str(paths.day_file(self.logs_dir, day)))
            return fd

    def prune(self, *, now: int, retain_days: int) -> int:
        """Delete day-files (and archived payload folders) older than `retain_days`."""
        cutoff = dt.datetime.fromtimestamp(now / 1000, dt.UTC).date() - dt.timedelta(retain_days)
        removed = 0
        for entry in os.scandir(self.logs_dir / "tasks"):
            day = paths.day_of_file(entry.name)
            if day is not None and day < cutoff and entry.is_file(follow_symlinks=False):
                with self._lock:
                    fd = self._fds.pop(day, None)
                if fd is not None:
                    os.close(fd)
                files.remove_file(entry.path)
                removed += 1
        return removed + self._prune_archive(cutoff)

    def _prune_archive(self, cutoff: dt.date) -> int:
        limit = dt.datetime.combine(cutoff, dt.time(), dt.UTC).timestamp()
        root = paths.archive_root(self.logs_dir)
        removed = 0
        for task_dir in root.glob("*/*/*") if root.is_dir() else ():
            if task_dir.is_symlink() or not task_dir.is_dir():
                continue
            newest = max((f.lstat().st_mtime for f in task_dir.iterdir()), default=0.0)
            if newest < limit:
                shutil.rmtree(task_dir)  # the folder is ours, and rmtree never follows symlinks
                removed += 1
        return removed

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds = {}
