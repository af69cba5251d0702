"""When a schedule is due: a five-field cron expression read in a time zone (croniter parses it).

Pure: no database and no clock; every function is given the times it compares, and answers
aware datetimes in UTC.

Daylight saving time, on the schedule's wall clock:
- a time the clocks skip (spring: 02:30 in Europe/Paris on the last Sunday of March) runs once,
  at the first minute after the gap (03:00), where croniter places it;
- a time the clocks pass twice (autumn: 02:00 to 03:00 comes round again) runs once, at its
  first occurrence; croniter would answer both, and a nightly job run twice is the surprise
  people remember about cron.
UTC has neither.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

FIELDS = ("minute", "hour", "day of month", "month", "day of week")
SECOND = dt.timedelta(seconds=1)
# croniter's backward search only bounds where the forward walk starts; its answers around a
# change of the clocks may be an hour off, which this margin covers.
BACKWARD_MARGIN = dt.timedelta(hours=3)
# Any fixed instant works to ask whether an expression is ever due; this one is a Monday.
PROBE = dt.datetime(2025, 1, 6, tzinfo=dt.UTC)


class InvalidSchedule(ValueError):
    """The expression or the time zone cannot be used; the message says why."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: a key such as "../x" or ""
        raise InvalidSchedule(
            f"{name!r} is not a time zone of the IANA database (e.g. Europe/Paris or UTC)."
        ) from None


def _cron_char(char: str) -> bool:
    """ASCII that shows, or a tab between fields."""
    return char == "\t" or (char.isascii() and char.isprintable())


def check(expression: str, tz_name: str) -> None:
    """Raise InvalidSchedule, with croniter's own message, unless the schedule can run."""
    odd = next((n for n, char in enumerate(expression) if not _cron_char(char)), None)
    if odd is not None:  # "٣ * * * *" would be refused by croniter in words that hide why
        raise InvalidSchedule(
            f"A cron expression is written in ASCII: digits 0-9, names such as MON, and "
            f"* / , - (got U+{ord(expression[odd]):04X} at position {odd})."
        )
    fields = expression.split()
    if len(fields) != len(FIELDS):
        raise InvalidSchedule(
            f"A cron expression has five fields ({', '.join(FIELDS)}); "
            f"{expression!r} has {len(fields)}."
        )
    next_due(expression, zone(tz_name), after=PROBE)


def next_due(expression: str, tz: ZoneInfo, *, after: dt.datetime) -> dt.datetime:
    """The first due time strictly after `after`."""
    try:
        times = croniter(expression, after.astimezone(tz))
        while True:
            local = times.get_next(dt.datetime)
            if not _second_pass(local):
                return local.astimezone(dt.UTC)
    except CroniterError as exc:  # a bad field, or a date that never comes (31 February)
        raise InvalidSchedule(f"{expression!r}: {exc}") from None


def latest_due(
    expression: str, tz: ZoneInfo, *, since: dt.datetime, now: dt.datetime
) -> dt.datetime | None:
    """The latest due time after `since` and at or before `now`, or None when none has come.

    Due times before it, missed while nothing ran, are passed over: a schedule catches up one
    run, not every run it missed."""
    due = next_due(expression, tz, after=since)
    if due > now:
        return None  # the common case, answered with one step
    # Far behind (a sweep stopped for days under "every minute"): start near `now` rather than
    # walking every missed minute forward.
    backward = croniter(expression, (now + SECOND).astimezone(tz))
    backward.get_prev(dt.datetime)
    start = backward.get_prev(dt.datetime).astimezone(dt.UTC) - BACKWARD_MARGIN
    if start > since:
        nearer = next_due(expression, tz, after=start)
        due = nearer if nearer <= now else due
    latest = due
    while due <= now:
        latest, due = due, next_due(expression, tz, after=due)
    return latest


def _second_pass(local: dt.datetime) -> bool:
    """A wall-clock time the clocks reach a second time, after they went back."""
    return local.fold == 1 and local.utcoffset() != local.replace(fold=0).utcoffset()
