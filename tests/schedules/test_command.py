"""`manage.py createschedule`: creates, updates, and refuses with the parser's own message."""

import io

import pytest
from django.core.management import CommandError, call_command

from schedules.models import Schedule

pytestmark = pytest.mark.django_db


def create(*args: str) -> str:
    out = io.StringIO()
    call_command("createschedule", *args, stdout=out)
    return out.getvalue()


def test_it_creates_then_updates_the_schedule(make_queue):
    make_queue()
    out = create("task.example.com", "resize", "nightly", "30 2 * * *", "--item",
                 '{"job": "report"}', "--tz", "Europe/Paris", "--priority", "5")  # fmt: skip
    assert out.startswith("created schedule nightly on task.example.com/resize: next run ")
    assert out.rstrip().endswith("02:30 Europe/Paris")
    first = Schedule.objects.get()
    assert (first.cron, first.timezone, first.item, first.priority, first.enabled) == (
        "30 2 * * *", "Europe/Paris", {"job": "report"}, 5, True,
    )  # fmt: skip
    out = create("task.example.com", "resize", "nightly", "0 3 * * *",
                 "--item", '{"job": "report"}', "--disabled")  # fmt: skip
    assert out == "updated schedule nightly on task.example.com/resize: disabled\n"
    again = Schedule.objects.get()
    assert (again.pk, again.cron, again.timezone, again.priority, again.enabled) == (
        first.pk, "0 3 * * *", "UTC", 0, False,
    )  # fmt: skip
    assert again.active_since > first.active_since  # retimed: its runs count from now


def test_an_update_that_keeps_the_timing_keeps_the_count(make_queue):
    make_queue()
    args = ("task.example.com", "resize", "nightly", "30 2 * * *", "--item")
    create(*args, '{"v": 1}')
    first = Schedule.objects.get()
    create(*args, '{"v": 2}')
    again = Schedule.objects.get()
    assert (again.item, again.active_since) == ({"v": 2}, first.active_since)


@pytest.mark.parametrize(
    ("cron", "item", "message"),
    [
        ("61 * * * *", "{}", "cron: '61 * * * *': [61 * * * *] is not acceptable, out of range"),
        ("* * *", "{}", "cron: A cron expression has five fields"),
        ("0 0 31 2 *", "{}", "failed to find next date"),
        ("* * * * *", "[1]", "item: The item must be a JSON object."),
        ("* * * * *", "{nope", "--item is not JSON"),
    ],
)
def test_a_bad_schedule_is_refused_and_nothing_is_saved(make_queue, cron, item, message):
    make_queue()
    with pytest.raises(CommandError) as raised:
        create("task.example.com", "resize", "nightly", cron, "--item", item)
    assert message in str(raised.value)
    assert not Schedule.objects.exists()


def test_a_name_the_rule_for_names_refuses_is_refused(make_queue):
    make_queue()
    with pytest.raises(CommandError, match=r"name: The name must not hold control.*U\+FEFF"):
        create("task.example.com", "resize", "\ufeffnightly", "* * * * *", "--item", "{}")
    assert not Schedule.objects.exists()


def test_a_priority_or_a_cron_field_not_in_ascii_digits_is_refused(make_queue):
    make_queue()
    with pytest.raises(CommandError, match="priority: the value must be an integer"):
        create("task.example.com", "resize", "n", "* * * * *", "--item", "{}", "--priority", "٣")
    with pytest.raises(CommandError, match=r"cron: A cron expression is written in ASCII.*U\+0663"):
        create("task.example.com", "resize", "n", "٣ * * * *", "--item", "{}")
    assert not Schedule.objects.exists()


def test_a_bad_time_zone_and_an_unknown_queue_are_refused(make_queue):
    make_queue()
    with pytest.raises(CommandError, match="timezone: 'Mars/Base' is not a time zone"):
        create("task.example.com", "resize", "n", "* * * * *", "--item", "{}", "--tz", "Mars/Base")
    with pytest.raises(CommandError, match=r"There is no queue 'task\.example\.com/nope'"):
        create("task.example.com", "nope", "n", "* * * * *", "--item", "{}")


def test_the_item_must_fit_the_queues_schema(make_queue):
    make_queue(item_schema={"type": "object", "required": ["job"]})
    with pytest.raises(CommandError, match="item: The item does not match the queue's schema"):
        create("task.example.com", "resize", "n", "* * * * *", "--item", '{"other": 1}')
