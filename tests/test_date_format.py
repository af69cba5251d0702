"""One way of writing a moment in the admin and the console: "2026-12-01 19:58:00 UTC"."""

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues.models import Host

pytestmark = pytest.mark.django_db
MOMENT = dt.datetime(2026, 12, 1, 19, 58, 7, tzinfo=dt.UTC)


def test_the_admin_writes_a_moment_as_the_console_does(make_queue):
    make_queue()
    Host.objects.update(created_at=MOMENT)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="a-long-admin-password"))
    page = client.get("/admin/queues/host/").content.decode()
    assert "2026-12-01 19:58:07 UTC" in page
    assert "Dec. 1, 2026" not in page and "p.m." not in page
