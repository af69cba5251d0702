"""The payload archive: task bodies kept beside the event log when a queue asks for it."""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from . import files, paths
from .errors import NotArchived

# The seed's files, one per kind, each holding the latest body of its kind: the item the task
# runs with (the posted one, or an operator's latest edit), the latest result and error, and
# every progress body (one line each, appended).
TASK_FILES = {"item": "item.json", "progress": "progress.jsonl"}
LATEST_FILES = {"item": "item.json", "result": "result.json", "error": "error.json"}
# Beside them, the history, written once and never overwritten: each event's result or error
# (`<attempt>-<event>.<kind>.json`), each edited item (`<attempt>-retried.item.json`), and,
# from its first edit on, the posted item (POSTED_ITEM).
PER_EVENT_KINDS = ("result", "error")
# An item an operator edited before a retry is archived by the `retried` line that carries it.
EDITED_ITEM_EVENT = "retried"
POSTED_ITEM = "0-posted.item.json"


def event_file(kind: str, attempt: int, event: str) -> str:
    """The file of a result or error body: `<attempt>-<event>.<kind>.json`, from the event
    line's own `attempts` and `event`, so the line names its file. (An attempt ends once, by
    one event; a pending task can still time out after its attempt failed: another event.)
    An edited item is `<attempt>-retried.item.json` the same way."""
    assert kind in PER_EVENT_KINDS or (kind, event) == ("item", EDITED_ITEM_EVENT), kind
    return f"{attempt}-{event}.{kind}.json"


def history_names(kind: str, attempt: int, event: str) -> Iterator[str]:
    """The names an event's body may take, in order: its own file, then (a name that is taken:
    an item edited again before the task ran again, at the same attempt) `-2`, `-3`..."""
    yield event_file(kind, attempt, event)
    for n in itertools.count(2):
        yield f"{attempt}-{event}-{n}.{kind}.json"


def is_event_payload(kind: str, event: str) -> bool:
    """Whether this kind of body, archived by this event, is the event's own file."""
    return kind in PER_EVENT_KINDS or (kind, event) == ("item", EDITED_ITEM_EVENT)


class PayloadArchive:
    """`<logs>/tasks-payloads/<host>/<queue>/<id>/`: the seed's item.json, result.json,
    error.json (each the latest body of its kind) and progress.jsonl, and beside them each
    event's own body, never overwritten (history_names). Apart from the item store, so
    archiving never changes retention.

    Archives written before the seed's files were kept again have no result.json or error.json
    for their later attempts, and an item.json that is still the posted item after an edit;
    older ones still, one result.json and one error.json, overwritten by each attempt."""

    def __init__(self, logs_dir: Path, *, fsync: files.Durable) -> None:
        self.logs_dir, self.fsync = logs_dir, fsync
        self._root = files.LogsTopDir(paths.archive_root(logs_dir), make_now=False)

    def _dir_fd(self, host: str, queue: str, task_id: str) -> int:
        folder = paths.archive_dir(self.logs_dir, host, queue, task_id)
        with files.storage_errors("the payload archive"):
            self._root.make()  # refused once the logs disk is gone (files.LogsTopDir)
            folder.mkdir(mode=files.DIR_MODE, parents=True, exist_ok=True)
            return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def write(self, host: str, queue: str, task_id: str, kind: str, body: Any) -> str:
        """Archive the posted item; returns the kind for the event."""
        assert kind == "item", kind
        return self._write(host, queue, task_id, TASK_FILES[kind], kind, body)

    def write_outcome(
        self, host: str, queue: str, task_id: str, kind: str, body: Any, *, attempt: int, event: str
    ) -> str:
        """Archive a result or error body of one event, or an edited item: its own file under
        the first free history name, then the same file as the kind's latest (a second name,
        so the body is written once). Returns the kind for the event."""
        fd = self._dir_fd(host, queue, task_id)
        try:
            if kind == "item":  # the posted item stays, before item.json takes the edit
                self._keep_posted_item(fd)
            name = self._write_new(fd, history_names(kind, attempt, event), orjson.dumps(body))
            files.commit_temp(fd, self._linked_temp(fd, name), LATEST_FILES[kind],
                              fsync=self.fsync)  # fmt: skip
        finally:
            os.close(fd)
        return kind

    def _write_new(self, fd: int, names: Iterator[str], data: bytes) -> str:
        """Write `data` under the first of `names` that is free; returns the name."""
        for name in names:
            try:
                files.publish_new(fd, files.write_temp(fd, data, fsync=self.fsync), name,
                                  fsync=self.fsync)  # fmt: skip
            except FileExistsError:
                continue
            return name
        raise AssertionError("history_names never ends")

    def _linked_temp(self, fd: int, name: str) -> str:
        """A temp name for the same file as `name`, to be renamed over a latest file."""
        temp = files.temp_name()
        os.link(name, temp, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        return temp

    def _keep_posted_item(self, fd: int) -> None:
        """Copy item.json to POSTED_ITEM if it is not kept yet: until the first edit item.json
        is the posted item (an archive of the older layout's too, whose item.json was never
        overwritten). Nothing to keep when the item was not archived at its post."""
        try:
            os.stat(POSTED_ITEM, dir_fd=fd, follow_symlinks=False)
            return
        except FileNotFoundError:
            pass
        try:
            temp = self._linked_temp(fd, LATEST_FILES["item"])
        except FileNotFoundError:
            return
        with contextlib.suppress(FileExistsError):
            files.publish_new(fd, temp, POSTED_ITEM, fsync=self.fsync)

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
            try:
                return orjson.loads(files.read_at(fd, latest_item_name(os.listdir(fd))))
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


def edit_order(name: str) -> tuple[int, int] | None:
    """(attempt, n) of an edited item's file, `<attempt>-retried[-<n>].item.json` (n is 1 for
    the first edit of an attempt), so the newest edit sorts last; None for any other name."""
    attempt, _, rest = name.partition("-")
    if not attempt.isdigit() or not attempt.isascii() or not rest.endswith(".item.json"):
        return None
    event, _, n = rest.removesuffix(".item.json").partition("-")
    if event != EDITED_ITEM_EVENT or (n and not (n.isascii() and n.isdigit())):
        return None
    return int(attempt), int(n or 1)


def latest_item_name(names: Iterable[str]) -> str:
    """The file of the item a task last ran with, among its archive's names: its newest edit
    (the older layout kept only the posted item in item.json), else item.json."""
    edits = [(order, name) for name in names if (order := edit_order(name)) is not None]
    return max(edits)[1] if edits else LATEST_FILES["item"]
