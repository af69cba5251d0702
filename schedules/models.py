"""A schedule: a task the sweep loop posts to a queue whenever a cron expression comes due."""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from queues.models import Queue
from queues.store import StoreError
from queues.store.posting import check_item
from queues.validators import validate_name

from . import cron

CATCH_UP_HELP = (
    "The sweep loop posts the task once per due time. After downtime (the sweep stopped, or "
    "the schedule disabled) it catches up at most one missed run: the latest one."
)
DST_HELP = (
    "Read in the schedule's time zone. When the clocks go forward, a time they skip runs at "
    "the first minute after the gap; when they go back, a time that comes twice runs once."
)


def validate_timezone(value: str) -> None:
    try:
        cron.zone(value)
    except cron.InvalidSchedule as exc:
        raise ValidationError(str(exc), code="invalid_timezone") from None


def _is_zone(value: str) -> bool:
    try:
        cron.zone(value)
    except cron.InvalidSchedule:
        return False
    return True


class Schedule(models.Model):
    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="schedules")
    name = models.CharField(
        max_length=100,
        validators=[validate_name],
        help_text="Unique within the queue, e.g. 'nightly'.",
    )
    cron = models.CharField(
        "cron expression",
        max_length=200,
        help_text="Five fields: minute hour day-of-month month day-of-week, "
        "e.g. '30 2 * * *' for 02:30 every day. " + DST_HELP,
    )
    timezone = models.CharField(
        "time zone",
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="An IANA time zone such as Europe/Paris.",
    )
    item = models.JSONField(help_text="The task's item: a JSON object, as a producer posts it.")
    priority = models.SmallIntegerField(
        default=0, validators=[MinValueValidator(-100), MaxValueValidator(100)]
    )
    enabled = models.BooleanField(default=True, help_text=CATCH_UP_HELP)
    # Runs are counted from here: created, enabled again, or given another expression or
    # time zone. Without it, enabling a schedule would post a run it was never meant to make.
    active_since = models.DateTimeField(editable=False)
    last_run_at = models.DateTimeField(
        "last run", null=True, blank=True, editable=False, help_text="The due time last posted."
    )
    last_task_id = models.CharField("last run's task", max_length=16, blank=True, editable=False)
    last_error = models.TextField(
        blank=True, editable=False, help_text="Why the last due run could not be posted."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["queue__host__name", "queue__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "name"], name="schedule_unique_per_queue"),
        ]

    def __str__(self) -> str:
        return f"{self.name} on {self.queue}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.cron:
            # A bad time zone is the field validator's to report; the expression is checked
            # on its own, in UTC then.
            zone_name = self.timezone if _is_zone(self.timezone) else "UTC"
            try:
                cron.check(self.cron, zone_name)
            except cron.InvalidSchedule as exc:
                errors["cron"] = str(exc)
        if self.queue_id is not None and self.item is not None:
            try:
                check_item(self.item, self.queue.to_settings())
            except StoreError as exc:  # not an object, too large, or refused by the schema
                errors["item"] = str(exc)
        if errors:
            raise ValidationError(errors)

    def next_run(self) -> dt.datetime:
        """The next due time still to run: in the past when the sweep is behind."""
        return cron.next_due(self.cron, cron.zone(self.timezone), after=self.runs_counted_from)

    @property
    def runs_counted_from(self) -> dt.datetime:
        """Due times after this one are still to run."""
        if self.last_run_at is None or self.last_run_at < self.active_since:
            return self.active_since
        return self.last_run_at
