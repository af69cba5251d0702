"""What a failure notification is made of, from a day-file line or a store's event row alike."""

from __future__ import annotations

import datetime as dt

import orjson

from queues.store import StoreError
from queues.stores.router import StoreOf

from .models import Kind, Webhook

FAILED_EVENTS = frozenset({"failed", "timeout"})
Hooks = dict[tuple[str, str], Webhook]  # (host, queue): the queue's webhook


def failure_body(
    store_of: StoreOf,
    host: str,
    queue: str,
    task_id: str,
    *,
    attempts: int,
    reason: str,
    at: dt.datetime,
) -> str:
    """The notification's JSON: the task's status as the store holds it now."""
    try:
        task = store_of(host, queue).read(host, queue, task_id).status_view()
    except StoreError:  # cleaned already (a short retention), or quarantined
        task = {"id": task_id, "host": host, "queue": queue, "status": "failed",
                "attempts": attempts}  # fmt: skip
    when = at.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return orjson.dumps(
        {"event": Kind.TASK_FAILED.value, "reason": reason, "at": when, "task": task}
    ).decode()
