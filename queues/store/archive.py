"""The payload archive: task bodies kept beside the event log when a queue asks for it."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import orjson

from . import files, paths
from .errors import NotArchived

# The kinds archived once per task; result and error are archived once per event that ends (or
# gives up) an attempt, so a later attempt never overwrites what an earlier one said.
TASK_FILES = {"item": "item.json", "progress": "progress.jsonl"}
PER_EVENT_KINDS = ("result", "error")
# An item an operator edited before a retry is archived by the `retried` line that carries it,
# beside the posted item.json, which it never overwrites: both stay to be compared.
EDITED_ITEM_EVENT = "retried"


def event_file(kind: str, attempt: int, event: str) -> str:
    """The file of a result or error body: `<attempt>-<event>.<kind>.json`, from the event
    line's own `attempts` and `event`, so the line names its file. (An attempt ends once, by
    one event; a pending task can still time out after its attempt failed: another event.)
    An edited item is `<attempt>-retried.item.json` the same way."""
    assert kind in PER_EVENT_KINDS or (kind, event) == ("item", EDITED_ITEM_EVENT), kind
    return f"{attempt}-{event}.{kind}.json"


def is_event_payload(kind: str, event: str) -> bool:
    """Whether this kind of body, archived by this event, is the event's own file."""
    return kind in PER_EVENT_KINDS or (kind, event) == ("item", EDITED_ITEM_EVENT)


class PayloadArchive:
    """`<logs>/tasks-payloads/<host>/<queue>/<id>/`: item.json, progress.jsonl (one line per
    progress body), and `<attempt>-<event>.result.json` / `.error.json` per event that archived
    one. Archives written before that kept one result.json and one error.json, overwritten by
    each attempt. Apart from the item store, so archiving never changes retention."""

    def __init__(self, logs_dir: Path, *, fsync: bool) -> None:
        self.logs_dir, self.fsync = logs_dir, fsync

    def _dir_fd(self, host: str, queue: str, task_id: str) -> int:
        folder = paths.archive_dir(self.logs_dir, host, queue, task_id)
        with files.storage_errors("the payload archive"):
            folder.mkdir(mode=files.DIR_MODE, parents=True, exist_ok=True)
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
            with files.storage_errors("the payload archive"):
                files.write_durable(fd, name, orjson.dumps(body), fsync=self.fsync)
        finally:
            os.close(fd)
        return kind

    def has_item(self, host: str, queue: str, task_id: str) -> bool:
        """Whether the posted item is kept (a plain file, not a symlink)."""
        folder = paths.archive_dir(self.logs_dir, host, queue, task_id)
        try:
            return stat.S_ISREG(os.lstat(folder / TASK_FILES["item"]).st_mode)
        except OSError:
            return False

    def latest_item(self, host: str, queue: str, task_id: str) -> Any:
        """The item the task last ran with: its newest edited item, else the posted one.
        NotArchived if neither is kept. The names are the store's validated ones; no symlink
        in the archive is followed."""
        try:
            fd = os.open(
                paths.archive_dir(self.logs_dir, host, queue, task_id),
                os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
            )
        except OSError as exc:  # absent, or a symlink in its place
            raise NotArchived() from exc
        try:
            edited = [edited_attempt(name) for name in os.listdir(fd)]
            newest = max((n for n in edited if n is not None), default=None)
            name = (
                TASK_FILES["item"]
                if newest is None
                else event_file("item", newest, EDITED_ITEM_EVENT)
            )
            try:
                return orjson.loads(files.read_at(fd, name))
            except (OSError, orjson.JSONDecodeError) as exc:
                raise NotArchived() from exc
        finally:
            os.close(fd)

    def append_progress(self, host: str, queue: str, task_id: str, body: Any) -> str:
        fd = self._dir_fd(host, queue, task_id)
        try:
            with files.storage_errors("the payload archive"):
                log = os.open(
                    TASK_FILES["progress"],
                    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                    files.FILE_MODE,
                    dir_fd=fd,
                )
        finally:
            os.close(fd)
        try:
            files.append(log, orjson.dumps(body) + b"\n", fsync=self.fsync)
        finally:
            os.close(log)
        return "progress"


def edited_attempt(name: str) -> int | None:
    """The attempt of an edited item's file name, `<attempt>-retried.item.json`; else None."""
    attempt, _, rest = name.partition("-")
    if rest != f"{EDITED_ITEM_EVENT}.item.json" or not (attempt.isascii() and attempt.isdigit()):
        return None
    return int(attempt)
