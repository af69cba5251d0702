"""A queue with a schedule on it, and a clock the tests pass in as `now`."""

import datetime as dt

import pytest

from queues import stores
from schedules.models import Schedule

# A Monday 10:00:20 UTC: the passes below run a little after each due minute.
T0 = dt.datetime(2030, 1, 7, 10, 0, 20, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)


@pytest.fixture
def make_schedule(make_queue):
    """`make_schedule(cron="*/5 * * * *", item={...})`, counted from T0 - 1 h."""

    def make(queue=None, *, name="nightly", active_since=T0 - 60 * MINUTE, **fields):
        fields = {"cron": "*/5 * * * *", "item": {"job": "report"}, **fields}
        queue = queue or make_queue()
        # this server serves the queue: its directories are here (a file queue's schedule is
        # posted only where they are), as a first post or claim would have made them
        stores.of(queue.host.name, queue.name).create_queue(queue.host.name, queue.name)
        schedule = Schedule(queue=queue, name=name, active_since=active_since, **fields)
        schedule.full_clean()
        schedule.save()
        return schedule

    return make
