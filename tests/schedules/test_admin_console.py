"""The schedule's admin form refuses a bad expression with the parser's message and explains the
catch-up; the console's queue page shows each schedule's next and last runs."""

import html

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues import stores
from schedules.models import Schedule
from schedules.running import post_due_schedules

from .conftest import T0

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="a-long-admin-password"))
    return client


def form(queue, **fields) -> dict:
    return {"queue": queue.pk, "name": "nightly", "cron": "30 2 * * *", "timezone": "UTC",
            "item": '{"job": "report"}', "priority": "0", "enabled": "on", **fields}  # fmt: skip


def test_the_admin_pages_open_and_explain_the_catch_up(admin_client, make_schedule):
    schedule = make_schedule()
    assert admin_client.get("/admin/schedules/schedule/").status_code == 200
    page = admin_client.get("/admin/schedules/schedule/add/").content.decode()
    assert "catches up at most one missed run" in page
    assert "a time that comes twice runs once" in page
    change = admin_client.get(f"/admin/schedules/schedule/{schedule.pk}/change/")
    assert change.status_code == 200


def test_an_invalid_expression_is_refused_with_the_parsers_message(admin_client, make_queue):
    queue = make_queue()
    response = admin_client.post("/admin/schedules/schedule/add/", form(queue, cron="61 * * * *"))
    assert response.status_code == 200  # the form again, with the error
    assert "[61 * * * *] is not acceptable, out of range" in html.unescape(
        response.content.decode()
    )
    assert not Schedule.objects.exists()


def test_a_priority_not_in_ascii_digits_is_refused(admin_client, make_queue):
    queue = make_queue()
    response = admin_client.post("/admin/schedules/schedule/add/", form(queue, priority="٣"))
    assert response.status_code == 200
    assert "Enter a whole number in the digits 0-9" in response.content.decode()
    assert not Schedule.objects.exists()


def test_a_valid_schedule_saved_in_the_admin_counts_its_runs_from_then(admin_client, make_queue):
    queue = make_queue()
    response = admin_client.post("/admin/schedules/schedule/add/", form(queue))
    assert response.status_code == 302
    schedule = Schedule.objects.get()
    assert schedule.active_since is not None and schedule.item == {"job": "report"}
    before = schedule.active_since
    response = admin_client.post(
        f"/admin/schedules/schedule/{schedule.pk}/change/", form(queue, cron="0 3 * * *")
    )
    assert response.status_code == 302
    assert Schedule.objects.get().active_since > before


def test_the_queue_page_shows_next_and_last_runs_with_the_task_linked(admin_client, make_schedule):
    schedule = make_schedule(cron="0 * * * *")
    post_due_schedules(stores.of, now=T0)
    schedule.refresh_from_db()
    queue = schedule.queue
    page = admin_client.get(f"/console/{queue.host.name}/{queue.name}/").content.decode()
    assert "nightly" in page and "0 * * * *" in page
    assert "2030-01-07 10:00:00.000Z" in page  # the last run
    task_url = f"/console/{queue.host.name}/{queue.name}/{schedule.last_task_id}/"
    assert f'href="{task_url}"' in page
    assert "2030-01-07 11:00:00.000Z" in page  # the next run, after the last one


def test_the_queue_page_without_schedules_says_how_to_add_one(admin_client, make_queue):
    queue = make_queue()
    page = admin_client.get(f"/console/{queue.host.name}/{queue.name}/").content.decode()
    assert "No schedule posts to this queue" in page
