"""The payload archive: task bodies kept beside the event log when a queue asks for it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from . import files, paths


class PayloadArchive:
    """`<logs>/tasks-payloads/<host>/<queue>/<id>/{item.json, progress.jsonl, result.json,
    error.json}`; apart from the item store, so archiving never changes retention."""

    def __init__(self, logs_dir: Path, *, fsync: bool) -> None:
        self.logs_dir, self.fsync = logs_dir, fsync

    def _dir_fd(self, host: str, queue: str, task_id: str) -> int:
        folder = paths.archive_dir(self.logs_dir, host, queue, task_id)
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def write(self, host: str, queue: str, task_id: str, kind: str, body: Any) -> str:
        """Archive one body (`item`, `result` or `error`); returns the kind for the event."""
        assert kind in ("item", "result", "error"), kind
        fd = self._dir_fd(host, queue, task_id)
        try:
            files.write_durable(fd, f"{kind}.json", orjson.dumps(body), fsync=self.fsync)
        finally:
            os.close(fd)
        return kind

    def append_progress(self, host: str, queue: str, task_id: str, body: Any) -> str:
        fd = self._dir_fd(host, queue, task_id)
        try:
            log = os.open(
                "progress.jsonl",
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
