"""The owner's and operator's verbs on a task: cancel, retry (with an edited item), requeue a
stuck one, hasten a waiting one, delete an ended one, and re-post one from its archived item.

What each may do is the transition table's (records.py); here, which refusal each answers
with when the task is in a state it does not act on. `by` is the operator's name, written on
the event line when given (an owner's call through the API gives none).
"""

from __future__ import annotations

from typing import Any

from . import copies, dependencies, paths, posting, rules
from .clock import now_ms
from .core import QueueCore
from .errors import NotDeletable
from .eventlog import Because
from .producing import post
from .records import Task
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
        change = rules.plan_cancel(found.task, found.directory, now=now, by=by)
        if change is None:
            return found.task  # its cancel was requested already
        return core.apply(qd, found.directory, change.old, change.new, change.event, now=now,
                          because=change.because)  # fmt: skip


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
    new item is archived with it (the posted item.json stays). A task posted with `after`
    waits again for what has not finished of it; a failed or gone one refuses the retry
    (rules.retry_waits_for). It is registered as a waiter before its record is written, and
    released here after, as a post is (dependencies.py)."""
    now = now_ms(now)
    if item is not None:
        posting.check_item(item, settings)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        change = rules.plan_retry(
            found.task, found.directory, settings=settings, now=now, by=by, item=item,
            dependencies=dependencies.statuses(core, found.task),
        )  # fmt: skip
        dependencies.register(core, change.new, change.new.waiting_for or [])
        task = core.apply(
            qd,
            found.directory,
            change.old,
            change.new,
            change.event,
            now=now,
            archive=change.archive or None,
            settings=settings,
            because=change.because,
        )
    if not task.waiting:
        return task
    dependencies.settle_new(core, task, now=now)
    with core.queue_dirs(host, queue) as qd:
        return copies.winner(qd, task.id).task


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
        change = rules.plan_requeue(found.task, found.directory, now=now, by=by)
        task = change.old
        worker = task.lease.worker if task.lease else None
        return core.apply(qd, found.directory, task, change.new, change.event, now=now,
                          worker=worker, archive=change.archive or None, settings=settings,
                          because=change.because)  # fmt: skip


def hasten(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    now: int | None = None,
    by: str | None = None,
) -> Task:
    """An operator makes a pending task that waits out its retry's backoff or its post's delay
    claimable now (`hastened`): a waiting claim wakes for it. Anything else -> NotWaiting."""
    now = now_ms(now)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        change = rules.plan_hasten(found.task, found.directory, now=now, by=by)
        return core.apply(qd, found.directory, change.old, change.new, change.event, now=now,
                          settings=settings, because=change.because)  # fmt: skip


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
