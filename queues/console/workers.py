"""The workers page: each worker of a queue (or of every queue an operator has), what it holds
now, when it last claimed or reported, and what it ended in the last hour.

What a worker holds comes from the store (its processing tasks and their leases), which both
stores answer alike; the rest from the events Task Logs ingested. A heartbeat is no event, so a
worker busy on one long task is known alive by its lease, which each heartbeat extends.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count, Max, Q

from queues import stores
from queues.models import Queue, WorkerSighting
from queues.store import NotFound, State
from queues.text.durations import readable_seconds
from tasklogs.models import TaskEvent

WINDOW_SECONDS = 60 * 60  # the workers shown: those seen in the last hour, and those holding tasks
# A worker that holds nothing and neither claimed nor reported for this long is shown gone quiet.
# A claim that finds nothing writes no event: the API notes a worker's claims (sightings.py), at
# most once a minute, so a worker idle on an empty queue stays "idle".
QUIET_AFTER_SECONDS = 5 * 60
QUIET_WORDS = readable_seconds(QUIET_AFTER_SECONDS)
HELD_SHOWN = 500  # processing tasks read per queue
# The events a worker's own requests write. A failure is its own when no lease lapsed and no
# operator acted: the sweep writes `failed` or `requeue` for a lapsed lease under the worker's
# name too, and that is the moment it was last heard of, not seen.
OWN_FAILURE = Q(event__in=("failed", "requeue"), lapsed=False, by="")
OWN_EVENTS = Q(event__in=("claimed", "progress", "result")) | OWN_FAILURE


@dataclass(frozen=True)
class Held:
    """A task a worker holds now."""

    task_id: str
    claimed_at: int | None  # epoch ms
    lease_left_ms: int  # at the page's now; 0 or less: the lease ran out


@dataclass
class WorkerRow:
    host: str
    queue: str
    name: str
    held: list[Held] = field(default_factory=list)
    last_seen: dt.datetime | None = None  # its last claim or report Task Logs saw
    finished: int = 0  # tasks it finished in the last hour
    failed: int = 0  # tasks whose attempt it failed in the last hour
    state: str = ""  # working, idle or quiet: set by workers_of
    why: str = ""  # the state in a few words

    @property
    def quiet(self) -> bool:
        return self.state == "quiet"


@dataclass(frozen=True)
class WorkersView:
    rows: list[WorkerRow]
    now_ms: int
    quiet_words: str = QUIET_WORDS

    @property
    def quiet(self) -> int:
        return sum(row.quiet for row in self.rows)


def workers_of(queues: Iterable[Queue], *, now_ms: int) -> WorkersView:
    """The workers of `queues`: those that claimed or reported in the last hour, and those
    holding a task now, one row per worker and queue, by queue then name."""
    keys = [(q.host.name, q.name) for q in queues]
    rows: dict[tuple[str, str, str], WorkerRow] = {}

    def row(host: str, queue: str, name: str) -> WorkerRow:
        return rows.setdefault((host, queue, name), WorkerRow(host, queue, name))

    for host, queue in keys:
        for held_by, held in _held(host, queue, now_ms):
            row(host, queue, held_by).held.append(held)
    for (host, queue, name), seen in _seen(keys, now_ms=now_ms).items():
        found = row(host, queue, name)
        found.last_seen, found.finished, found.failed = seen
    for (host, queue, name), claimed in _sighted(keys, now_ms=now_ms).items():
        found = row(host, queue, name)
        if found.last_seen is None or claimed > found.last_seen:
            found.last_seen = claimed
    for found in rows.values():
        found.held.sort(key=lambda held: held.claimed_at or 0)
        found.state, found.why = _state(found, now_ms)
    return WorkersView(rows=[rows[key] for key in sorted(rows)], now_ms=now_ms)


def _held(host: str, queue: str, now_ms: int) -> list[tuple[str, Held]]:
    """The queue's processing tasks, each with the worker whose lease holds it."""
    try:
        page = stores.of(host, queue).list_tasks(
            host, queue, status=State.PROCESSING.value, limit=HELD_SHOWN
        )
    except NotFound:  # never posted to: the store has nothing of it
        return []
    return [
        (task.lease.worker, Held(task.id, task.claimed_at, task.lease.until - now_ms))
        for task in page.tasks
        if task.lease is not None
    ]


def _seen(
    keys: list[tuple[str, str]], *, now_ms: int
) -> dict[tuple[str, str, str], tuple[dt.datetime, int, int]]:
    """Per (host, queue, worker) seen in the window: its last event's time, the tasks it
    finished and the tasks whose attempt it failed. One query for every queue."""
    wanted = set(keys)
    if not wanted:
        return {}
    rows = (
        TaskEvent.objects.filter(
            OWN_EVENTS,
            host__in={host for host, _ in wanted},
            queue__in={queue for _, queue in wanted},
            t__gte=now_ms // 1000 - WINDOW_SECONDS,
        )
        .exclude(worker="")
        .values_list("host", "queue", "worker")
        .annotate(
            last=Max("at"),
            finished=Count("task_id", filter=Q(event="result"), distinct=True),
            failed=Count("task_id", filter=OWN_FAILURE, distinct=True),
        )
        .order_by()
    )
    return {
        (host, queue, worker): (last, finished, failed_count)
        for host, queue, worker, last, finished, failed_count in rows
        if (host, queue) in wanted
    }


def _sighted(
    keys: list[tuple[str, str]], *, now_ms: int
) -> dict[tuple[str, str, str], dt.datetime]:
    """Per (host, queue, worker) claiming in the window, its last claim as the API noted it
    (queues/api/sightings.py: to the minute), found or not. One query for every queue."""
    wanted = set(keys)
    if not wanted:
        return {}
    since = dt.datetime.fromtimestamp(now_ms / 1000 - WINDOW_SECONDS, dt.UTC)
    rows = WorkerSighting.objects.filter(
        host__in={host for host, _ in wanted},
        queue__in={queue for _, queue in wanted},
        seen_at__gte=since,
    ).values_list("host", "queue", "worker", "seen_at")
    return {
        (host, queue, worker): seen_at
        for host, queue, worker, seen_at in rows
        if (host, queue) in wanted
    }


def _state(row: WorkerRow, now_ms: int) -> tuple[str, str]:
    """working: it holds a task whose lease is running; quiet: a lease it holds ran out (its
    heartbeats stopped), or it holds nothing and was not seen for QUIET_AFTER_SECONDS; else
    idle."""
    lapsed = [held for held in row.held if held.lease_left_ms <= 0]
    if lapsed:
        return "quiet", f"its lease on {lapsed[0].task_id} ran out: no heartbeat"
    if row.held:
        return "working", f"holds {len(row.held)}"
    seen_ms = int(row.last_seen.timestamp() * 1000) if row.last_seen else 0
    if now_ms - seen_ms > QUIET_AFTER_SECONDS * 1000:
        return "quiet", f"holds nothing, no claim or report for {QUIET_WORDS}"
    return "idle", "holds nothing"
