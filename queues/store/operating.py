"""The owner's and operator's verbs on a task: cancel it, retry it."""

from __future__ import annotations

from . import copies, paths
from .clock import now_ms
from .core import QueueCore
from .errors import NotCancellable, NotRetryable
from .records import State, Task
from .settings import QueueSettings


def cancel(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    now: int | None = None,
) -> Task:
    """pending -> cancelled; processing -> cancelRequested; terminal -> NotCancellable."""
    now = now_ms(now)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        task = found.task
        if task.status is State.PENDING:
            new = task.replace(
                status=State.CANCELLED, updated_at=now, finished_at=now, ended_by=None
            )
            return core.apply(qd, found.directory, task, new, "cancelled", now=now)
        if task.status is State.PROCESSING:
            if task.cancel_requested:
                return task
            new = task.replace(cancel_requested=True, updated_at=now)
            return core.apply(qd, found.directory, task, new, None, now=now)
        raise NotCancellable()


def retry(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    now: int | None = None,
) -> Task:
    """failed or cancelled -> pending, with a fresh attempt budget and a fresh queue-timeout
    window (requeuedAt)."""
    now = now_ms(now)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        task = found.task
        if task.status not in (State.FAILED, State.CANCELLED):
            raise NotRetryable()
        budget = settings.attempt_budget()
        new = task.replace(
            status=State.PENDING,
            updated_at=now,
            lease=None,
            progress=None,
            result=None,
            error=None,
            finished_at=None,
            fetched_at=None,
            cancel_requested=False,
            available_at=0,
            max_attempts=task.attempts + budget if budget else 0,
            last_error=task.result if task.result is not None else task.error,
            requeued_at=now,
            ended_by=None,
        )
        return core.apply(qd, found.directory, task, new, "retried", now=now)
