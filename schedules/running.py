"""Posting each schedule's task when it comes due: what the sweep loop calls once per pass.

Exactly once per due time, even with two sweeps at once or a sweep killed between its post and
its bookkeeping: the post carries the idempotency key `schedule:<id>:<due epoch>`, so a second
post for the same due time (another sweep, or this one restarted) gets the first post's task
back instead of making one. The store scopes a key by (host, queue, postedBy, key); schedules
post as POSTED_BY, a name no user can have (Django user names hold no ':'), so no producer can
take a schedule's key first or own its tasks.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.db.models import Q

from queues.store import IdempotencyKeyReused, StoreError, Task
from queues.stores.router import StoreOf

from . import cron
from .models import Schedule

POSTED_BY = "taskhoster:schedule"
logger = logging.getLogger("taskhoster.schedules")


@dataclass(kw_only=True)
class ScheduleReport:
    posted: int = 0
    failed: int = 0


def run_key(schedule: Schedule, due: dt.datetime) -> str:
    return f"schedule:{schedule.pk}:{int(due.timestamp())}"


def post_due_schedules(store_of: StoreOf, *, now: dt.datetime) -> ScheduleReport:
    report = ScheduleReport()
    for schedule in Schedule.objects.filter(enabled=True).select_related("queue__host"):
        try:
            task = post_if_due(store_of, schedule, now=now)
        except (StoreError, cron.InvalidSchedule) as exc:
            report.failed += 1
            _record_error(schedule, str(exc))
        else:
            report.posted += task is not None
    return report


def post_if_due(store_of: StoreOf, schedule: Schedule, *, now: dt.datetime) -> Task | None:
    """Post the schedule's latest due run if it has not run yet; None when nothing is due.

    A refusal (the queue is full, the item no longer fits its schema) raises the store's error
    and leaves the run due: the next pass tries again until a later due time replaces it. A file
    queue's run is posted only by the server that holds its directories (store.holds_queue):
    until a first post or claim makes them, its runs wait."""
    zone = cron.zone(schedule.timezone)
    due = cron.latest_due(schedule.cron, zone, since=schedule.runs_counted_from, now=now)
    if due is None:
        return None
    queue = schedule.queue
    store = store_of(queue.host.name, queue.name)
    if not store.holds_queue(queue.host.name, queue.name):
        # A file queue this server has no directories of is served by another (README,
        # several web servers): its sweep posts the run; one posted here would make the
        # queue's directories on a disk no worker of it looks at.
        return None
    try:
        posted = store.post(
            queue.host.name,
            queue.name,
            schedule.item,
            settings=queue.to_settings(),
            posted_by=POSTED_BY,
            priority=schedule.priority,
            idempotency_key=run_key(schedule, due),
            now=int(now.timestamp() * 1000),
        )
    except IdempotencyKeyReused:
        # This due time was posted already, before the item was edited, and the bookkeeping
        # was lost (a sweep killed in between): the run happened, so it is not posted again.
        _record_run(schedule, due, "")
        return None
    _record_run(schedule, due, posted.task.id)
    return posted.task


def _record_run(schedule: Schedule, due: dt.datetime, task_id: str) -> None:
    # Only forward: a slower sweep that posted the same due time must not move it back.
    not_yet = Q(last_run_at__isnull=True) | Q(last_run_at__lt=due)
    Schedule.objects.filter(not_yet, pk=schedule.pk).update(
        last_run_at=due, last_task_id=task_id, last_error=""
    )
    schedule.last_run_at, schedule.last_task_id, schedule.last_error = due, task_id, ""


def _record_error(schedule: Schedule, error: str) -> None:
    if error != schedule.last_error:  # said once, not on every pass until it is fixed
        logger.warning("schedule %s: %s", schedule, error)
        Schedule.objects.filter(pk=schedule.pk).update(last_error=error)
        schedule.last_error = error
