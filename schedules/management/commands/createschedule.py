"""`manage.py createschedule HOST QUEUE NAME "CRON" --item JSON [--tz ZONE] [--priority P]
[--disabled]`: create a schedule, or state the whole of an existing one again."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from queues.services import describe
from queues.store import numerals
from schedules.cron import zone
from schedules.models import Schedule
from schedules.services import save_schedule


class Command(BaseCommand):
    help = (
        "Create a schedule that posts ITEM to HOST/QUEUE whenever CRON comes due, or update the "
        "schedule of that name: every option not given takes its default again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("host")
        parser.add_argument("queue")
        parser.add_argument("name")
        parser.add_argument("cron", help="five fields, e.g. '30 2 * * *' (quote it)")
        parser.add_argument("--item", required=True, help="the task's item, a JSON object")
        parser.add_argument("--tz", default="UTC", help="IANA time zone (default UTC)")
        parser.add_argument(
            "--priority", type=numerals.integer_option, default=0, help="-100 to 100 (default 0)"
        )
        parser.add_argument("--disabled", action="store_true", help="save it without running it")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            item = json.loads(options["item"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--item is not JSON: {exc}") from None
        now = timezone.now()
        try:
            schedule, created = save_schedule(
                options["host"], options["queue"], options["name"], now=now,
                cron=options["cron"], timezone=options["tz"], item=item,
                priority=options["priority"], enabled=not options["disabled"],
            )  # fmt: skip
        except ValidationError as exc:
            raise CommandError(describe(exc)) from None
        self.stdout.write(
            f"{'created' if created else 'updated'} schedule {schedule}: {_when(schedule)}"
        )


def _when(schedule: Schedule) -> str:
    if not schedule.enabled:
        return "disabled"
    local = schedule.next_run().astimezone(zone(schedule.timezone))
    return f"next run {local:%Y-%m-%d %H:%M} {schedule.timezone}"
