"""Ingested events for the console's tests: TaskEvent rows as the ingester stores them."""

from __future__ import annotations

import datetime as dt
import itertools
import time

from tasklogs.models import TaskEvent

HOST = "task.example.com"
STATUS_AFTER = {
    "posted": "pending", "claimed": "processing", "progress": "processing",
    "result": "finished", "failed": "failed", "timeout": "failed", "cancelled": "cancelled",
    "requeue": "pending", "requeued": "pending", "retried": "pending",
    "deleted": "finished", "fetched": "finished", "cleaned": "finished",
}  # fmt: skip
_offsets = itertools.count(1)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def event(kind: str, task_id: str, at_ms: int, *, queue: str = "resize", host: str = HOST,
          status: str | None = None, worker: str = "") -> TaskEvent:  # fmt: skip
    offset = next(_offsets)
    return TaskEvent(
        t=at_ms // 1000,
        at=dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC),
        host=host, queue=queue, task_id=task_id, event=kind,
        status=status or STATUS_AFTER[kind], attempts=1, worker=worker,
        bytes_item=2, bytes_progress=0, bytes_result=0, bytes_error=0, archived="",
        file="test.jsonl", offset=offset, digest=offset,
    )  # fmt: skip


def store(*events: TaskEvent) -> None:
    TaskEvent.objects.bulk_create(events)


def lifecycle(task_id: str, posted_ms: int, *steps: tuple[str, int], **where: str) -> None:
    """A task's events: posted at `posted_ms`, then each (event, ms after the posting)."""
    store(
        event("posted", task_id, posted_ms, **where),
        *(event(kind, task_id, posted_ms + after, **where) for kind, after in steps),
    )
