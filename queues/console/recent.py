"""What happened lately on the queues, from Task Logs: the workers at work and the last
failures. One query each for the whole dashboard, served by the events' indexes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count

from tasklogs.models import TaskEvent

Key = tuple[str, str]  # (host, queue)
WORKERS_WINDOW_SECONDS = 15 * 60
# The events a worker writes: a claim, its progress, its result or failure.
WORKER_EVENTS = ("claimed", "progress", "result", "failed")
FAILURES_SHOWN = 10


def workers_seen(queues: Iterable[Key], *, now_s: int) -> dict[Key, int]:
    """Per queue, how many distinct workers claimed or reported in the last 15 minutes."""
    wanted = set(queues)
    seen = dict.fromkeys(wanted, 0)
    if not wanted:
        return seen
    rows = (
        TaskEvent.objects.filter(
            host__in={host for host, _ in wanted},
            queue__in={queue for _, queue in wanted},
            event__in=WORKER_EVENTS,
            t__gte=now_s - WORKERS_WINDOW_SECONDS,
        )
        .exclude(worker="")
        .values_list("host", "queue")
        .annotate(workers=Count("worker", distinct=True))
        .order_by()
    )
    for host, queue, workers in rows:
        if (host, queue) in seen:
            seen[(host, queue)] = workers
    return seen


@dataclass(frozen=True, kw_only=True)
class Failure:
    host: str
    queue: str
    task_id: str
    event: str  # failed (by its worker) or timeout (by the sweep)
    at: dt.datetime
    attempts: int
    worker: str
    archived_kinds: list[str]  # the bodies its event archived (the reason may be one of them)
    reason: str  # the event line's own first line of the failure
    error_line: str = ""  # why, in one line (tasklogs.failure_lines): filled in by the caller


def recent_failures(queues: Iterable[Key], *, limit: int = FAILURES_SHOWN) -> list[Failure]:
    """The latest `limit` failures (a worker's or a timeout) among `queues`, newest first."""
    wanted = set(queues)
    if not wanted:
        return []
    rows = TaskEvent.objects.filter(
        event__in=("failed", "timeout"),
        host__in={host for host, _ in wanted},
        queue__in={queue for _, queue in wanted},
    ).order_by("-at", "-id")
    found: list[Failure] = []
    # Pairs not in `queues` (a queue of the same name on another host) come back too: skip them.
    for row in rows.iterator(chunk_size=limit * 4):
        if (row.host, row.queue) in wanted:
            found.append(
                Failure(
                    host=row.host,
                    queue=row.queue,
                    task_id=row.task_id,
                    event=row.event,
                    at=row.at,
                    attempts=row.attempts,
                    worker=row.worker,
                    archived_kinds=row.archived_kinds,
                    reason=row.reason,
                )
            )
            if len(found) == limit:
                break
    return found
