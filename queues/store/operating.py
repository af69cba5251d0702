"""The owner's and operator's verbs on a task: cancel, retry (with an edited item), requeue a
stuck one, delete an ended one, and re-post one from its archived item.

What each may do is the transition table's (records.py); here, which refusal each answers
with when the task is in a state it does not act on. `by` is the operator's name, written on
the event line when given (an owner's call through the API gives none).
"""

from __future__ import annotations

from typing import Any

from . import copies, paths, posting
from .clock import now_ms
from .core import QueueCore
from .errors import NotCancellable, NotDeletable, NotRequeueable, NotRetryable
from .eventlog import Because
from .producing import post
from .records import State, Task
from .results import PostResult
from .settings import QueueSettings


def cancel(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    now: int | None = None,
    by: str | None = None,
) -> Task:
    """pending -> cancelled; processing -> cancelRequested (and cancelRequestedBy, so the
    line that ends it names the operator); terminal -> NotCancellable."""
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
            return core.apply(
                qd, found.directory, task, new, "cancelled", now=now, because=Because(by=by)
            )
        if task.status is State.PROCESSING:
            if task.cancel_requested:
                return task
            new = task.replace(cancel_requested=True, cancel_requested_by=by, updated_at=now)
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
    by: str | None = None,
    item: Any = None,
) -> Task:
    """failed or cancelled -> pending, with a fresh attempt budget and a fresh queue-timeout
    window (requeuedAt). With `item`, an operator's edit: the item is checked as a post's
    (the queue's schema and size cap) and replaces the task's; the line says `edited`, and the
    new item is archived with it (the posted item.json stays)."""
    now = now_ms(now)
    if item is not None:
        posting.check_item(item, settings)
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
            item=task.item if item is None else item,
            updated_at=now,
            lease=None,
            progress=None,
            result=None,
            error=None,
            finished_at=None,
            fetched_at=None,
            cancel_requested=False,
            cancel_requested_by=None,
            available_at=0,
            max_attempts=task.attempts + budget if budget else 0,
            last_error=task.result if task.result is not None else task.error,
            requeued_at=now,
            ended_by=None,
        )
        return core.apply(
            qd,
            found.directory,
            task,
            new,
            "retried",
            now=now,
            archive={"item": item} if item is not None else None,
            settings=settings,
            because=Because(by=by, edited=item is not None),
        )


def requeue(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    now: int | None = None,
    by: str | None = None,
) -> Task:
    """An operator ends a processing task's lease now, as if it had lapsed: the attempt counts.
    The task goes back to pending (`requeued`), unless a lapsed lease would end it: a task
    whose cancel was requested is cancelled, one past its attempt budget fails ("attempts").
    Anything else -> NotRequeueable. Its worker's later reports are refused (lease_lost)."""
    now = now_ms(now)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        task = found.task
        if task.status is not State.PROCESSING:
            raise NotRequeueable()
        worker = task.lease.worker if task.lease else None
        because = Because(by=by)
        if task.cancel_requested:
            new = task.replace(status=State.CANCELLED, lease=None, updated_at=now, finished_at=now)
            return core.apply(qd, found.directory, task, new, "cancelled", now=now,
                              worker=worker, settings=settings, because=because)  # fmt: skip
        if task.max_attempts and task.attempts >= task.max_attempts:
            new = task.replace(
                status=State.FAILED, error="attempts", lease=None, updated_at=now, finished_at=now
            )
            return core.apply(qd, found.directory, task, new, "failed", now=now, worker=worker,
                              archive={"error": "attempts"}, settings=settings,
                              because=because)  # fmt: skip
        new = task.replace(status=State.PENDING, lease=None, updated_at=now, ended_by=None)
        return core.apply(qd, found.directory, task, new, "requeued", now=now, worker=worker,
                          settings=settings, because=because)  # fmt: skip


def delete(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    now: int | None = None,
    by: str | None = None,
) -> Task:
    """An operator removes a finished, failed or cancelled task now (`deleted`); its archived
    payloads and its events stay. Anything else -> NotDeletable. Returns the task as it was."""
    now = now_ms(now)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        task = found.task
        if not task.status.terminal:
            raise NotDeletable()
        core.remove(qd, task, now=now, event="deleted", because=Because(by=by))
        return task


def repost(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    now: int | None = None,
    by: str | None = None,
) -> PostResult:
    """A new task whose item is the one `task_id` last ran with, read from the payload archive,
    so it works after the store has cleaned that task. Checked as a post (schema, size cap,
    maxPending); posted by the operator; every line of the new task names the old id (`from`).
    NotArchived when the archive keeps no item of it."""
    paths.validate_task_id(task_id)
    item = core.archive.latest_item(host, queue, task_id)
    return post(core, host, queue, item, settings=settings, posted_by=by, now=now,
                reposted_from=task_id, because=Because(by=by))  # fmt: skip
