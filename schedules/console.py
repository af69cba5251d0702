"""What the console's queue page shows of a queue's schedules. Nothing here renders."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from queues.models import Queue

from . import cron
from .models import Schedule


@dataclass(frozen=True)
class ScheduleRow:
    schedule: Schedule
    next_run: dt.datetime | None  # None when disabled or unreadable
    overdue: bool  # due and not posted yet: the sweep is not running, or cannot post
    problem: str


def schedule_rows(queue: Queue, *, now: dt.datetime) -> list[ScheduleRow]:
    rows = []
    for schedule in Schedule.objects.filter(queue=queue).order_by("name"):
        next_run, problem = None, schedule.last_error
        if schedule.enabled:
            try:
                next_run = schedule.next_run()
            except cron.InvalidSchedule as exc:
                problem = str(exc)
        rows.append(
            ScheduleRow(schedule, next_run, next_run is not None and next_run < now, problem)
        )
    return rows
