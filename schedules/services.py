"""Saving a schedule, shared by the admin and `manage.py createschedule`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from queues.services import find_queue

from .models import Schedule

# Changing any of these starts the count of runs again from the change: a schedule enabled
# after a month, or moved from hourly to daily, owes no run for the time before.
TIMING_FIELDS = frozenset({"cron", "timezone", "enabled"})


def restart_count_if_retimed(
    schedule: Schedule, changed: Iterable[str], *, now: dt.datetime
) -> None:
    if schedule.pk is None or TIMING_FIELDS.intersection(changed):
        schedule.active_since = now


@transaction.atomic
def save_schedule(
    host: str, queue: str, name: str, *, now: dt.datetime, **fields: Any
) -> tuple[Schedule, bool]:
    """Create the schedule, or update the one of that name on the queue.

    Validation is the model's own (`full_clean`), so the admin and the command agree. Raises
    ValidationError and writes nothing when a field is refused."""
    found = find_queue(f"{host}/{queue}")
    schedule = Schedule.objects.filter(queue=found, name=name).first()
    created = schedule is None
    if schedule is None:
        schedule = Schedule(queue=found, name=name)
    changed = [field for field, value in fields.items() if getattr(schedule, field) != value]
    for field, value in fields.items():
        setattr(schedule, field, value)
    restart_count_if_retimed(schedule, changed, now=now)
    schedule.full_clean()
    schedule.save()
    return schedule, created
