"""The producer's verbs: post a task, read it, fetch its result, wait for it to change."""

from __future__ import annotations

import secrets
import time
from typing import Any

from . import copies, paths, posting
from .clock import now_ms
from .core import QueueCore
from .eventlog import NO_REASON, Because
from .inotify import arrivals, watcher
from .records import State, Task
from .results import PostResult
from .settings import QueueSettings


def post(
    core: QueueCore,
    host: str,
    queue: str,
    item: Any,
    *,
    settings: QueueSettings,
    posted_by: str | None,
    priority: int = 0,
    delay_seconds: int = 0,
    idempotency_key: str | None = None,
    now: int | None = None,
    reposted_from: str | None = None,
    because: Because = NO_REASON,
) -> PostResult:
    now = now_ms(now)
    posting.check_item(item, settings)
    posting.check_options(settings, priority, delay_seconds, idempotency_key)
    task = Task(
        id=secrets.token_hex(8),
        host=paths.validate_host(host),
        queue=paths.validate_queue(queue),
        status=State.PENDING,
        item=item,
        posted_by=posted_by,
        posted_at=now,
        updated_at=now,
        rev=1,
        priority=priority,
        available_at=now + delay_seconds * 1000 if delay_seconds else 0,
        max_attempts=settings.attempt_budget(),
        idempotency_key=idempotency_key,
        reposted_from=reposted_from,
    )
    with core.queue_dirs(host, queue, create=True) as qd:
        if not settings.max_pending:
            prior = core.admit(qd, task, now=now, settings=settings, because=because)
        else:
            with posting.posts_locked(qd):
                with core.lock:
                    posting.check_room(core.pending_count(qd), settings)
                prior = core.admit(qd, task, now=now, settings=settings, because=because)
    if prior is not None:
        return PostResult(task=prior, replayed=True)
    return PostResult(task=task, replayed=False)


def read(core: QueueCore, host: str, queue: str, task_id: str) -> Task:
    """The task as it stands (the highest rev of its copies). Never stamps anything."""
    paths.validate_task_id(task_id)
    with core.queue_dirs(host, queue) as qd:
        return copies.winner(qd, task_id).task


def fetch(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    now: int | None = None,
    current: Task | None = None,
) -> Task:
    """The producer's read: the first read of a terminal result sets fetchedAt.

    `current`: the task as the caller has just read it, which spares a second read of
    every copy; the stamp itself still re-reads the record under its lock."""
    task = read(core, host, queue, task_id) if current is None else current
    if not task.status.terminal or task.fetched_at is not None:
        return task
    now = now_ms(now)
    with core.queue_dirs(host, queue) as qd, copies.locked(qd, task_id) as found:
        task = found.task
        if not task.status.terminal or task.fetched_at is not None:
            return task  # someone else stamped (or retried) it first
        new = task.replace(fetched_at=now)
        return core.apply(qd, found.directory, task, new, "fetched", now=now)


def wait_for_change(
    core: QueueCore, host: str, queue: str, task_id: str, *, since: int, wait_seconds: float
) -> Task:
    """Return as soon as the task's updatedAt differs from `since`, or when the wait ends."""
    # Held for the wait: its reads use the directories, and the watches are made from them.
    with core.queue_dirs(host, queue) as qd:
        # Every change of state renames the task's file into one of its queue's state dirs.
        # (A task deleted meanwhile, by retention, is answered when the wait ends: not found.)
        dirs = [qd.proc_path(directory) for directory in paths.STATE_DIRS]
        return _wait(core, host, queue, task_id, dirs, since=since, wait_seconds=wait_seconds)


def _wait(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    dirs: list[str],
    *,
    since: int,
    wait_seconds: float,
) -> Task:
    # Only this task's own name: every other task's transition in the queue used to wake
    # each waiting read into a read of all its copies.
    name = paths.task_file(task_id)
    deadline = time.monotonic() + wait_seconds
    with watcher().channel(dirs, arrivals(), wanted=name.__eq__) as channel:
        while True:
            generation = channel.generation
            task = read(core, host, queue, task_id)
            remaining = deadline - time.monotonic()
            if task.updated_at != since or remaining <= 0:
                return task
            channel.wait(generation, remaining)
