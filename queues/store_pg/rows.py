"""A Task as th_tasks' row, an event line as the events table's row, and back."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import orjson

from queues.store.eventlog import NO_REASON, Because, event_line
from queues.store.records import State, Task

# the file store's directory for each status: the shared rules (rules.py) speak of where a
# record is, and in this store a task's status is where it is
DIRECTORY = {state: state.directory for state in State}

# th_tasks' columns that every write sets from the record, in this order
TASK_COLUMNS = (
    "status",
    "priority",
    "attempts",
    "posted_at",
    "available_at",
    "window_start",
    "lease_until",
    "posted_by",
    "idempotency_key",
    "updated_at",
    "finished_at",
    "fetched_at",
    "record",
)


# each column's type, for the arrays a batch is written from (unnest)
TASK_TYPES = ("text", "integer", "integer", "bigint", "bigint", "bigint", "bigint", "text",
              "text", "bigint", "bigint", "bigint", "text")  # fmt: skip


# The status column of a pending task that waits for others (dependencies.py): no claim, no
# queue-timeout window (their partial indexes name 'pending') ever reads its row. Its record
# says pending, and every count and filter of pending takes both (status_column).
WAITING = "waiting"


def status_column(state: State) -> list[str]:
    """The status column's values of a status (pending: the waiting ones too)."""
    return [state.value, WAITING] if state is State.PENDING else [state.value]


def task_values(task: Task) -> tuple[Any, ...]:
    """The TASK_COLUMNS values of a task (record: the file's JSON text, byte for byte)."""
    return (
        WAITING if task.waiting else task.status.value,
        task.priority,
        task.attempts,
        task.posted_at,
        task.available_at,
        task.window_start,
        task.lease.until if task.lease is not None else None,
        task.posted_by,
        task.idempotency_key,
        task.updated_at,
        task.finished_at,
        task.fetched_at,
        record_text(task),
    )


def record_text(task: Task) -> str:
    return orjson.dumps(task.to_record()).decode()


def task_of(record: str | bytes) -> Task:
    return Task.from_record(orjson.loads(record))


def listed_task(record: str | bytes, seq: int) -> Task:
    """A task as a listing gives it: with the row's seq (post order), which its record does
    not hold, so that its order key (selecting.key_of) is the one the listing sorted by."""
    return dataclasses.replace(task_of(record), seq=seq)


# the events table's columns, in the order event_values gives them ("offset" is the
# sequence's next value, added by the INSERT itself)
EVENT_COLUMNS = (
    "t",
    "at",
    "host",
    "queue",
    "task_id",
    "event",
    "status",
    "attempts",
    "worker",
    "bytes_item",
    "bytes_progress",
    "bytes_result",
    "bytes_error",
    "archived",
    "by",
    "origin",
    "edited",
    "lapsed",
    "reason",
    "file",
    "digest",
)
EVENT_TYPES = ("bigint", "timestamptz", "text", "text", "text", "text", "text", "integer", "text",
               "bigint", "bigint", "bigint", "bigint", "text", "text", "text", "boolean",
               "boolean", "text", "text", "bigint")  # fmt: skip
EVENT_FILE = "postgres"  # what a row's `file` says: written by the store, not read from a file


def event_values(
    task: Task,
    event: str,
    *,
    now: int,
    worker: str | None,
    archived: list[str],
    because: Because = NO_REASON,
) -> tuple[Any, ...]:
    """The row of the line the file store would write for this change (eventlog.event_line,
    the one place its fields are decided), as Task Logs' ingester stores a line."""
    line = event_line(task, event, now=now, worker=worker, archived=archived, because=because)
    sizes = line["bytes"]
    return (
        line["t"],
        # whole milliseconds, as the line's `at` (no float rounding on the way)
        dt.datetime.fromtimestamp(now // 1000, dt.UTC) + dt.timedelta(milliseconds=now % 1000),
        line["host"],
        line["queue"],
        line["id"],
        line["event"],
        line["status"],
        line["attempts"],
        line["worker"] or "",
        sizes["item"],
        sizes["progress"],
        sizes["result"],
        sizes["error"],
        ",".join(line["archived"]),
        line.get("by") or "",
        line.get("from") or "",
        bool(line.get("edited")),
        bool(line.get("lapsed")),
        line.get("reason", ""),
        EVENT_FILE,
        0,
    )


def line_of(row: dict[str, Any]) -> dict[str, Any]:
    """An events row as the file store's event line (the tests compare the two stores' logs,
    the live event stream sends lines)."""
    line: dict[str, Any] = {
        "t": row["t"],
        "at": row["at"].astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        + f"{row['at'].microsecond // 1000:03d}Z",
        "host": row["host"],
        "queue": row["queue"],
        "id": row["task_id"],
        "event": row["event"],
        "status": row["status"],
        "attempts": row["attempts"],
        "worker": row["worker"] or None,
        "bytes": {
            "item": row["bytes_item"],
            "progress": row["bytes_progress"],
            "result": row["bytes_result"],
            "error": row["bytes_error"],
        },
        "archived": row["archived"].split(",") if row["archived"] else [],
    }
    if row["by"]:
        line["by"] = row["by"]
    if row["origin"]:
        line["from"] = row["origin"]
    if row["edited"]:
        line["edited"] = True
    if row["lapsed"]:
        line["lapsed"] = True
    if row["reason"]:
        line["reason"] = row["reason"]
    return line
