"""The payload archive: task bodies kept beside the event log when a queue asks for it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from . import files, paths

# The kinds archived once per task; result and error are archived once per event that ends (or
# gives up) an attempt, so a later attempt never overwrites what an earlier one said.
TASK_FILES = {"item": "item.json", "progress": "progress.jsonl"}
PER_EVENT_KINDS = ("result", "error")


def event_file(kind: str, attempt: int, event: str) -> str:
    """The file of a result or error body: `<attempt>-<event>.<kind>.json`, from the event
    line's own `attempts` and `event`, so the line names its file. (An attempt ends once, by
    one event; a pending task can still time out after its attempt failed: another event.)"""
    assert kind in PER_EVENT_KINDS, kind
    return f"{attempt}-{event}.{kind}.json"


class PayloadArchive:
    """`<logs>/tasks-payloads/<host>/<queue>/<id>/`: item.json, progress.jsonl (one line per
    progress body), and `<attempt>-<event>.result.json` / `.error.json` per event that archived
    one. Archives written before that kept one result.json and one error.json, overwritten by
    each attempt. Apart from the item store, so archiving never changes retention."""

    def __init__(self, logs_dir: Path, *, fsync: bool) -> None:
        self.logs_dir, self.fsync = logs_dir, fsync

    def _dir_fd(self, host: str, queue: str, task_id: str) -> int:
        folder = paths.archive_dir(self.logs_dir, host, queue, task_id)
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def write(self, host: str, queue: str, task_id: str, kind: str, body: Any) -> str:
        """Archive the posted item; returns the kind for the event."""
        assert kind == "item", kind
        return self._write(host, queue, task_id, TASK_FILES[kind], kind, body)

    def write_outcome(
        self, host: str, queue: str, task_id: str, kind: str, body: Any, *, attempt: int, event: str
    ) -> str:
        """Archive a result or error body of one event; returns the kind for the event."""
        return self._write(host, queue, task_id, event_file(kind, attempt, event), kind, body)

    def _write(self, host: str, queue: str, task_id: str, name: str, kind: str, body: Any) -> str:
        fd = self._dir_fd(host, queue, task_id)
        try:
            files.write_durable(fd, name, orjson.dumps(body), fsync=self.fsync)
        finally:
            os.close(fd)
        return kind

    def append_progress(self, host: str, queue: str, task_id: str, body: Any) -> str:
        fd = self._dir_fd(host, queue, task_id)
        try:
            log = os.open(
                TASK_FILES["progress"],
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=fd,
            )
        finally:
            os.close(fd)
        try:
            files.append(log, orjson.dumps(body) + b"\n", fsync=self.fsync)
        finally:
            os.close(log)
        return "progress"
