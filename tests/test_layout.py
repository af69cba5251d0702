"""The one layout every console and Task Logs page shares: a skip link to the content, the
navigation, and a CSRF token in every form that posts."""

import re

import pytest

from .console_events import lifecycle, now_ms
from .test_console import client_for, post

pytestmark = pytest.mark.django_db


@pytest.fixture
def pages(make_queue):
    queue = make_queue()
    task = post(queue)
    lifecycle(task.id, now_ms() - 60_000, ("claimed", 10))
    return [
        "/",
        "/console/task.example.com/resize/",
        f"/console/task.example.com/resize/{task.id}/",
        "/console/task.example.com/resize/insight/",
        "/logs/",
        f"/logs/task.example.com/resize/{task.id}/",
    ]


def test_every_page_has_the_layout_and_every_post_form_its_csrf_token(pages):
    client = client_for("sam", is_staff=True)
    for path in pages:
        page = client.get(path).content.decode()
        assert '<a class="skip" href="#main">Skip to content</a>' in page, path
        assert '<main id="main" tabindex="-1">' in page, path
        assert '<nav class="top-nav" aria-label="Main">' in page, path
        forms = re.findall(r"<form[^>]*method=\"post\"[^>]*>.*?</form>", page, re.S | re.I)
        assert forms, path  # log out, at least
        for form in forms:
            assert 'name="csrfmiddlewaretoken"' in form, (path, form)


def test_the_section_in_view_is_marked_in_the_navigation(pages):
    client = client_for("sam", is_staff=True)
    assert '<a href="/" aria-current="page">Queues</a>' in client.get("/").content.decode()
    logs = client.get("/logs/").content.decode()
    assert '<a href="/logs/" aria-current="page">Task logs</a>' in logs
