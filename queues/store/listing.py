"""Reads over a whole queue: a page of its tasks, and its counts."""

from __future__ import annotations

import os

from . import copies, paths
from .clock import now_ms
from .core import QueueCore
from .errors import CorruptRecord
from .records import State, Task
from .results import ANY, QueueStats, TaskPage, _Any


def list_tasks(
    core: QueueCore,
    host: str,
    queue: str,
    *,
    status: str | None = None,
    posted_by: str | _Any | None = ANY,
    limit: int = 50,
    offset: int = 0,
) -> TaskPage:
    wanted = State(status) if status is not None else None
    best: dict[str, Task] = {}
    directories = [wanted.directory] if wanted else list(paths.STATE_DIRS)
    with core.queue_dirs(host, queue) as qd:
        for directory in directories:
            for entry in os.scandir(qd.fd(directory)):
                task_id = paths.task_id_of(entry.name)
                if task_id is None:
                    continue
                try:
                    task = copies.read_copy(qd, directory, task_id)
                except CorruptRecord:
                    continue  # listings skip a corrupt file; the sweep quarantines it
                if task is not None and (task_id not in best or task.rev > best[task_id].rev):
                    best[task_id] = task
    found = [
        t
        for t in best.values()
        if (wanted is None or t.status is wanted)
        and (isinstance(posted_by, _Any) or t.posted_by == posted_by)
    ]
    found.sort(key=lambda t: (t.posted_at, t.id), reverse=True)
    return TaskPage(count=len(found), tasks=found[offset : offset + limit])


def stats(core: QueueCore, host: str, queue: str, *, now: int | None = None) -> QueueStats:
    """Counts from listings and the pending index; no record is read twice."""
    now = now_ms(now)
    with core.queue_dirs(host, queue) as qd:
        with core.lock:
            entries = list(core.index(qd).entries.values())
        counts = {
            d: sum(1 for e in os.scandir(qd.fd(d)) if paths.task_id_of(e.name))
            for d in ("processing", "done")
        }
    return QueueStats(
        pending=len(entries),
        processing=counts["processing"],
        done=counts["done"],
        delayed=sum(1 for e in entries if e[2] > now and not e[3]),
        retrying=sum(1 for e in entries if e[2] > now and e[3]),
        oldest_pending_ms=max((now - min(e[1] for e in entries)), 0) if entries else 0,
    )
