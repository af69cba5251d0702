"""The worker's verbs on a claimed task: progress, finish, fail. Each is fenced: only the worker
and attempt the claim named may change the task."""

from __future__ import annotations

from typing import Any

from . import copies, paths
from .claiming import checked_lease_ms
from .clock import now_ms
from .core import QueueCore
from .errors import InvalidRequest, LeaseLost
from .posting import check_size
from .records import Lease, State, Task
from .settings import QueueSettings


def _claimed_ms(task: Task, settings: QueueSettings) -> int:
    """The claim's own lease length; the queue's for a record written before it was kept.

    Clamped to the queue timeout, which an admin may have lowered since the claim."""
    seconds = task.lease_seconds or settings.lease_seconds
    return min(seconds, settings.queue_seconds) * 1000


def _held(task: Task, worker: str, attempt: int) -> None:
    """Fencing: only the worker and attempt the claim named may change a processing task."""
    lease = task.lease
    if (
        task.status is not State.PROCESSING
        or lease is None
        or lease.worker != worker
        or task.attempts != attempt
    ):
        raise LeaseLost()


def progress(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    progress: Any = None,
    lease_seconds: int | None = None,
    now: int | None = None,
) -> Task:
    """Record progress (optional) and extend the lease by the claim's lease length."""
    now = now_ms(now)
    if lease_seconds is not None:
        checked_lease_ms(settings, lease_seconds)  # refuse a bad value before touching anything
    if progress is not None:
        check_size("progress", progress, settings)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        task = found.task
        _held(task, worker, attempt)
        lease_ms = (
            checked_lease_ms(settings, lease_seconds)
            if lease_seconds
            else _claimed_ms(task, settings)
        )
        changes: dict[str, Any] = {
            "lease": Lease(worker=worker, until=now + lease_ms),
            "updated_at": now,
        }
        if progress is not None:
            changes["progress"] = progress
        new = task.replace(**changes)
        body = {"progress": progress} if progress is not None else {}
        return core.apply(
            qd,
            found.directory,
            task,
            new,
            "progress",
            now=now,
            worker=worker,
            archive=body,
            settings=settings,
        )


def finish(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    result: Any,
    now: int | None = None,
) -> Task:
    now = now_ms(now)
    check_size("result", result, settings)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        task = found.task
        _held(task, worker, attempt)
        new = task.replace(
            status=State.FINISHED, result=result, lease=None, updated_at=now, finished_at=now
        )
        return core.apply(
            qd,
            found.directory,
            task,
            new,
            "result",
            now=now,
            worker=worker,
            archive={"result": result},
            settings=settings,
        )


def fail(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    result: Any = None,
    retry: bool = False,
    cancelled: bool = False,
    now: int | None = None,
) -> Task:
    """Failed; with `retry` and budget left, back to pending after the backoff; with `cancelled`
    on a task whose cancel was requested, cancelled."""
    now = now_ms(now)
    if result is not None:
        check_size("result", result, settings)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        task = found.task
        _held(task, worker, attempt)
        end = {"lease": None, "updated_at": now}
        if cancelled:
            if not task.cancel_requested:
                raise InvalidRequest("Only a task whose cancel was requested can end cancelled.")
            new = task.replace(status=State.CANCELLED, result=result, finished_at=now, **end)
            event = "cancelled"
        elif (
            retry
            and not task.cancel_requested
            and (not task.max_attempts or task.attempts < task.max_attempts)
        ):
            new = task.replace(
                status=State.PENDING,
                last_error=result,
                progress=None,
                available_at=now + settings.backoff_ms(task.attempts),
                **end,
            )
            event = "requeue"
        else:
            error = (
                "attempts" if retry and task.max_attempts and not task.cancel_requested else None
            )
            new = task.replace(
                status=State.FAILED, result=result, error=error, finished_at=now, **end
            )
            event = "failed"
        body = {"result": result} if result is not None else {}
        if new.error:
            body["error"] = new.error
        return core.apply(
            qd,
            found.directory,
            task,
            new,
            event,
            now=now,
            worker=worker,
            archive=body,
            settings=settings,
        )
