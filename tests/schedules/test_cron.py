"""Due times: five fields, read in a time zone, one run per wall-clock time across DST."""

import datetime as dt

import pytest

from schedules.cron import InvalidSchedule, check, latest_due, next_due, zone

UTC = dt.UTC
PARIS = zone("Europe/Paris")


def at(*fields: int, tz=UTC) -> dt.datetime:
    return dt.datetime(*fields, tzinfo=tz)


def runs(expression: str, tz, start: dt.datetime, count: int) -> list[dt.datetime]:
    found, moment = [], start
    for _ in range(count):
        moment = next_due(expression, tz, after=moment)
        found.append(moment)
    return found


def test_next_due_is_strictly_after_and_in_utc():
    assert next_due("*/5 * * * *", UTC, after=at(2025, 1, 1, 10, 5)) == at(2025, 1, 1, 10, 10)
    assert next_due("30 2 * * *", PARIS, after=at(2025, 1, 1)) == at(2025, 1, 1, 1, 30)


def test_latest_due_catches_up_one_run_not_every_missed_one():
    since, now = at(2025, 1, 1, 10, 0), at(2025, 1, 1, 13, 20)  # down for three hours
    assert latest_due("0 * * * *", UTC, since=since, now=now) == at(2025, 1, 1, 13, 0)
    assert latest_due("0 * * * *", UTC, since=at(2025, 1, 1, 13, 0), now=now) is None


def test_latest_due_counts_a_due_time_equal_to_now():
    now = at(2025, 1, 1, 11, 0)
    assert latest_due("0 * * * *", UTC, since=at(2025, 1, 1, 10, 0), now=now) == now


def test_latest_due_after_a_year_down_under_every_minute_is_the_last_minute():
    since, now = at(2024, 1, 1), at(2025, 1, 1, 0, 0, 30)
    assert latest_due("* * * * *", UTC, since=since, now=now) == at(2025, 1, 1)


def test_a_time_the_clocks_skip_runs_once_after_the_gap():
    # 2025-03-30 in Paris: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that day.
    days = runs("30 2 * * *", PARIS, at(2025, 3, 29, 12, tz=PARIS), 2)
    assert days == [at(2025, 3, 30, 1, 0), at(2025, 3, 31, 0, 30)]  # 03:00 CEST, then 02:30
    since = at(2025, 3, 29, 12, tz=PARIS)
    assert latest_due("30 2 * * *", PARIS, since=since, now=at(2025, 3, 30, 4, tz=PARIS)) == (
        at(2025, 3, 30, 1, 0)
    )


def test_a_time_the_clocks_pass_twice_runs_once():
    # 2025-10-26 in Paris: 03:00 CEST goes back to 02:00 CET; 02:30 comes twice.
    days = runs("30 2 * * *", PARIS, at(2025, 10, 25, 12, tz=PARIS), 2)
    assert days == [at(2025, 10, 26, 0, 30), at(2025, 10, 27, 1, 30)]  # the first 02:30 only
    half_hours = runs("*/30 * * * *", PARIS, at(2025, 10, 26, 1, 50, tz=PARIS), 4)
    assert [d.astimezone(PARIS).strftime("%H:%M%z") for d in half_hours] == [
        "02:00+0200", "02:30+0200", "03:00+0100", "03:30+0100",
    ]  # fmt: skip
    since, now = at(2025, 10, 26, 0, 45), at(2025, 10, 26, 1, 45)  # 02:45 CEST .. 02:45 CET
    assert latest_due("30 2 * * *", PARIS, since=since, now=now) is None


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * *", "has 3"),
        ("0 0 * * * *", "has 6"),
        ("@hourly", "has 1"),
        ("61 * * * *", "out of range"),
        ("a b c d e", "not acceptable"),
        ("0 0 31 2 *", "failed to find next date"),
    ],
)
def test_an_invalid_expression_is_refused_with_the_reason(expression, message):
    with pytest.raises(InvalidSchedule, match=message):
        check(expression, "UTC")


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "utc "])
def test_an_unknown_time_zone_is_refused(name):
    with pytest.raises(InvalidSchedule, match="not a time zone"):
        check("* * * * *", name)
