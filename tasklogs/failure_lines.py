"""Why an attempt failed, in one line, for the lists that show failures (Task Logs, the
dashboard's Recent failures, a task's attempts).

A failure's event line says why in one line (`reason`), so each attempt keeps its own error
whatever happens to the task after. A line written before it did names only the sizes of its
bodies: the reason is then read from the body the event archived (the queue keeps payloads), or
else from the task itself while its record still holds that attempt's body; failing both, the
store's own word for the end (timeout, attempts).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import orjson
from django.conf import settings

from queues import stores
from queues.auth.access import User
from queues.store import State, Task
from queues.store.error_line import error_line
from queues.store.errors import StoreError
from queues.store.eventlog import FAILURE_EVENTS

from .payloads import open_payload

READ_BYTES = 64 * 1024  # the reason is at the start of a body; a longer one is read no further
STORE_WORDS = {"timeout": "the queue timeout passed", "attempts": "no attempt left"}


class Failed(Protocol):
    """The fields of an event line that name the failure: a TaskEvent has them all."""

    host: str
    queue: str
    task_id: str
    attempts: int
    event: str
    reason: str  # the line's own (empty on a line written before lines said it)

    @property
    def archived_kinds(self) -> list[str]: ...


Key = tuple[str, str, str, int, str]  # host, queue, task id, attempts, event


def failure_key(event: Failed) -> Key:
    return (event.host, event.queue, event.task_id, event.attempts, event.event)


def failure_lines(user: User, events: Iterable[Failed]) -> dict[Key, str]:
    """(host, queue, task_id, attempts, event) of each failure event among `events`, to the
    first line of its reason ("" when none is kept). The caller shows only events the user may
    see; the archive is read with the user's rights all the same."""
    tasks: dict[tuple[str, str, str], Task | None] = {}
    lines: dict[Key, str] = {}
    for event in events:
        if event.event not in FAILURE_EVENTS:
            continue
        key = failure_key(event)
        if key in lines:
            continue
        line = _worded(event.reason) or _archived_line(user, event)
        if not line:
            task_key = key[:3]
            if task_key not in tasks:
                tasks[task_key] = _task(*task_key)
            line = _record_line(tasks[task_key], event)
        lines[key] = line
    return lines


def _archived_line(user: User, event: Failed) -> str:
    logs_dir = Path(settings.TASKHOSTER_LOGS_DIR)
    for kind in ("result", "error"):
        if kind not in event.archived_kinds:
            continue
        opened = open_payload(user, logs_dir, event.host, event.queue, event.task_id, kind,
                              attempt=event.attempts, event=event.event)  # fmt: skip
        if opened is None:
            continue
        body, _ = opened
        with body:
            head = body.read(READ_BYTES + 1)
        line = _line_of(head)
        if line:
            return line
    return ""


def _line_of(head: bytes) -> str:
    if len(head) <= READ_BYTES:
        with contextlib.suppress(orjson.JSONDecodeError):
            return _worded(error_line(orjson.loads(head)))
    return error_line(head[:READ_BYTES].decode("utf-8", errors="replace"))


def _task(host: str, queue: str, task_id: str) -> Task | None:
    try:
        return stores.of(host, queue).read(host, queue, task_id)
    except StoreError:  # deleted, or gone with the retention: the archive was the only copy
        return None


def _record_line(task: Task | None, event: Failed) -> str:
    """The reason from the task's record, when the record still holds this attempt's end."""
    if task is None or task.attempts != event.attempts:
        return ""
    if event.event == "requeue" and task.status is State.PENDING:
        return error_line(task.last_error)
    if event.event in ("failed", "timeout") and task.status is State.FAILED:
        return error_line(task.result) or _worded(task.error or "")
    return ""


def _worded(line: str) -> str:
    """The store's one-word ends said in words; any other reason as it is."""
    return STORE_WORDS.get(line.strip('"'), line)
