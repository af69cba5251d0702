"""The sweep's schedules pass: each due time posts once, across restarts and beside another
sweep; one missed run is caught up; a refused post is said once and tried again."""

import datetime as dt
import io

import pytest
from django.core.management import call_command
from django.utils import timezone

from queues import stores
from queues.models import Queue
from queues.store import NotFound
from schedules.models import Schedule
from schedules.running import POSTED_BY, post_due_schedules, post_if_due, run_key

from .conftest import MINUTE, T0

pytestmark = pytest.mark.django_db


def tasks_of(queue) -> list:
    try:
        return (
            stores.of(queue.host.name, queue.name)
            .list_tasks(queue.host.name, queue.name, limit=1000)
            .tasks
        )
    except NotFound:  # never posted to
        return []


def at(hour: int, minute: int, second: int = 20) -> dt.datetime:
    return T0.replace(hour=hour, minute=minute, second=second)


def test_a_due_schedule_posts_its_item_as_the_schedule(make_schedule):
    schedule = make_schedule(item={"job": "report", "day": 1}, priority=7)
    report = post_due_schedules(stores.of, now=at(10, 0))
    assert report.posted == 1
    (task,) = tasks_of(schedule.queue)
    assert (task.item, task.priority, task.posted_by) == ({"job": "report", "day": 1}, 7, POSTED_BY)
    assert task.idempotency_key == run_key(schedule, at(10, 0, 0))
    schedule.refresh_from_db()
    assert (schedule.last_run_at, schedule.last_task_id) == (at(10, 0, 0), task.id)


def test_due_twice_across_a_sweep_restart_posts_twice_not_three_times(make_schedule):
    schedule = make_schedule()
    store = stores.router()
    post_due_schedules(store.of, now=at(10, 0))
    # The sweep is killed after its post and before its bookkeeping: the database still says
    # the schedule never ran. The restarted sweep finds the same due time due again.
    Schedule.objects.filter(pk=schedule.pk).update(last_run_at=None, last_task_id="")
    assert post_due_schedules(store.of, now=at(10, 1)).posted == 1  # the first post, replayed
    assert len(tasks_of(schedule.queue)) == 1
    post_due_schedules(store.of, now=at(10, 5))  # the second due time
    post_due_schedules(store.of, now=at(10, 6))
    assert len(tasks_of(schedule.queue)) == 2
    schedule.refresh_from_db()
    assert schedule.last_run_at == at(10, 5, 0)


def test_two_sweeps_with_the_same_due_time_post_once(make_schedule):
    make_schedule()
    store = stores.router()
    # Both sweeps loaded the schedule before either posted: each finds 10:00 due.
    first, second = Schedule.objects.get(), Schedule.objects.get()
    a = post_if_due(store.of, first, now=at(10, 0))
    b = post_if_due(store.of, second, now=at(10, 0, 40))
    assert a is not None and b is not None and a.id == b.id
    assert len(tasks_of(first.queue)) == 1
    assert Schedule.objects.get().last_task_id == a.id


def test_after_downtime_only_the_latest_missed_run_is_posted(make_schedule):
    schedule = make_schedule(last_run_at=at(10, 0, 0))
    post_due_schedules(stores.of, now=at(12, 7))  # 10:05 .. 12:05 were missed: 25 runs
    (task,) = tasks_of(schedule.queue)
    assert task.idempotency_key == run_key(schedule, at(12, 5, 0))


def test_a_new_schedule_owes_no_run_from_before_it_existed(make_schedule):
    schedule = make_schedule(active_since=at(10, 2))
    assert post_due_schedules(stores.of, now=at(10, 4)).posted == 0
    assert post_due_schedules(stores.of, now=at(10, 5)).posted == 1
    assert len(tasks_of(schedule.queue)) == 1


def test_a_disabled_schedule_posts_nothing(make_schedule):
    schedule = make_schedule(enabled=False)
    assert post_due_schedules(stores.of, now=at(11, 0)).posted == 0
    assert tasks_of(schedule.queue) == []


def test_a_refused_post_is_recorded_once_and_tried_again(make_schedule, make_queue, caplog):
    queue = make_queue(max_pending=1)
    schedule = make_schedule(queue)
    store = stores.router()
    stores.of(queue.host.name, queue.name).post(
        queue.host.name, queue.name, {"n": 1}, settings=queue.to_settings(), posted_by=None
    )
    for second in (20, 30, 40):
        assert post_due_schedules(store.of, now=at(10, 0, second)).failed == 1
    schedule.refresh_from_db()
    assert "maximum number of pending" in schedule.last_error and schedule.last_run_at is None
    assert sum("maximum" in r.getMessage() for r in caplog.records) == 1  # said once, not per pass
    queue.max_pending = 0
    queue.save()
    assert post_due_schedules(store.of, now=at(10, 1)).posted == 1
    schedule.refresh_from_db()
    assert (schedule.last_error, schedule.last_run_at) == ("", at(10, 0, 0))


def test_an_item_edited_after_a_lost_bookkeeping_is_not_posted_again(make_schedule):
    schedule = make_schedule()
    post_due_schedules(stores.of, now=at(10, 0))
    Schedule.objects.filter(pk=schedule.pk).update(
        last_run_at=None, last_task_id="", item={"job": "other"}
    )
    assert post_due_schedules(stores.of, now=at(10, 1)).posted == 0
    assert len(tasks_of(schedule.queue)) == 1
    assert Schedule.objects.get().last_run_at == at(10, 0, 0)


def test_a_run_posted_again_into_a_full_queue_is_its_replay_not_a_refusal(make_queue,
                                                                       make_schedule):  # fmt: skip
    """The queue's one place is the run's own task: posting the run again (its bookkeeping was
    lost) answers that task, not queue_full."""
    schedule = make_schedule(make_queue(max_pending=1))
    assert post_due_schedules(stores.of, now=at(10, 0)).posted == 1
    Schedule.objects.filter(pk=schedule.pk).update(last_run_at=None, last_task_id="")
    report = post_due_schedules(stores.of, now=at(10, 1))
    assert (report.posted, report.failed) == (1, 0)
    schedule.refresh_from_db()
    assert schedule.last_error == ""
    assert [t.id for t in tasks_of(schedule.queue)] == [schedule.last_task_id]


def test_a_schedule_saved_with_a_bad_expression_is_reported_not_fatal(make_schedule):
    bad = make_schedule(name="bad")
    good = make_schedule(bad.queue, name="good")
    Schedule.objects.filter(pk=bad.pk).update(cron="0 0 31 2 *")  # bypassing validation
    report = post_due_schedules(stores.of, now=at(10, 0))
    assert (report.posted, report.failed) == (1, 1)
    assert "failed to find next date" in Schedule.objects.get(pk=bad.pk).last_error
    assert Schedule.objects.get(pk=good.pk).last_task_id


def test_the_sweep_command_posts_what_is_due(make_schedule):
    schedule = make_schedule(cron="* * * * *", active_since=timezone.now() - 5 * MINUTE)
    call_command("sweep", stdout=io.StringIO())
    call_command("sweep", stdout=io.StringIO())  # the same minute, most likely: nothing more
    assert 1 <= len(tasks_of(schedule.queue)) <= 2  # 2 only if the minute turned in between
    schedule.refresh_from_db()
    assert schedule.last_task_id in {task.id for task in tasks_of(schedule.queue)}


def other_server(tmp_path):
    """A second web server of the several-servers layout: the same database, its own disk."""
    from queues.store import QueueStore, StoreConfig

    root = tmp_path / "other-server"
    return QueueStore(StoreConfig(items_dir=root / "items", logs_dir=root / "logs", fsync=False))


def test_a_file_queues_run_is_posted_only_by_the_server_holding_its_directories(
    make_schedule, tmp_path
):
    schedule = make_schedule()
    queue = schedule.queue
    other = other_server(tmp_path)
    try:
        report = post_due_schedules(lambda host, queue: other, now=at(10, 0))
        assert (report.posted, report.failed) == (0, 0)
        assert other.queues() == []  # no directory made where no worker of it looks
        assert not (tmp_path / "other-server" / "items" / queue.host.name).exists()
    finally:
        other.close()
    assert post_due_schedules(stores.of, now=at(10, 0)).posted == 1
    assert len(tasks_of(queue)) == 1


def test_a_file_queue_without_directories_waits_for_them(make_queue, store_dirs):
    queue = make_queue("task.example.com", "fresh")  # never posted to nor claimed from
    schedule = Schedule(queue=queue, name="nightly", cron="*/5 * * * *", item={"job": "r"},
                        active_since=T0 - 60 * MINUTE)  # fmt: skip
    schedule.full_clean()
    schedule.save()
    assert post_due_schedules(stores.of, now=at(10, 0)).posted == 0
    assert not (store_dirs["items"] / "task.example.com" / "fresh").exists()
    schedule.refresh_from_db()
    assert schedule.last_error == "" and schedule.last_run_at is None
    stores.of("task.example.com", "fresh").create_queue(
        "task.example.com", "fresh"
    )  # a first claim, say
    assert post_due_schedules(stores.of, now=at(10, 1)).posted == 1


def test_createqueue_makes_a_file_queues_directories_on_its_server(store_dirs):
    """So that a schedule on a queue nobody has posted to yet runs where the command ran."""
    call_command("createqueue", "task.example.com", "cmd", stdout=io.StringIO())
    assert (store_dirs["items"] / "task.example.com" / "cmd" / "pending").is_dir()
    schedule = Schedule(queue=Queue.objects.get(name="cmd"), name="n", cron="*/5 * * * *",
                        item={"job": "r"}, active_since=T0 - 60 * MINUTE)  # fmt: skip
    schedule.full_clean()
    schedule.save()
    assert post_due_schedules(stores.of, now=at(10, 0)).posted == 1


def test_a_postgresql_queues_run_is_posted_by_any_server(make_queue, pg_store, store_dirs):
    queue = make_queue("task.example.com", "shared", store="postgres")
    schedule = Schedule(queue=queue, name="n", cron="*/5 * * * *", item={"job": "r"},
                        active_since=T0 - 60 * MINUTE)  # fmt: skip
    schedule.full_clean()
    schedule.save()
    assert post_due_schedules(stores.of, now=at(10, 0)).posted == 1
    assert not (store_dirs["items"] / "task.example.com").exists()
