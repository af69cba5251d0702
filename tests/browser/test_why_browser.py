"""Why is my task not running? A pending task's page says it in one line, above its actions,
at a desktop's and a phone's width (issue 36, item 10)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from queues import stores
from queues.services import grant, save_queue
from tests.browser.pages import DESKTOP, PHONE, assert_fits, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOST = "task.example.com"


def test_a_pending_tasks_page_says_why_it_is_not_running(page, live_server, shoot):
    User.objects.create_user("olga", password="a-long-operator-password")
    queue, _ = save_queue(HOST, "resize")
    grant("olga", f"{HOST}/resize", "operator")
    store, settings = stores.of(HOST, "resize"), queue.to_settings()
    first = store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by="alice").task
    waiting = store.post(HOST, "resize", {"n": 2}, settings=settings, posted_by="alice",
                         after=[f"resize/{first.id}"]).task  # fmt: skip
    log_in(page, live_server, "olga", "a-long-operator-password")
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/console/{HOST}/resize/{waiting.id}/")
    expect(page.locator("p.task-why")).to_have_text(
        f"Why it is not running: Waiting for resize/{first.id} (pending) to finish."
    )
    shoot(page, "why-waiting-desktop")
    page.goto(f"{live_server.url}/console/{HOST}/resize/{first.id}/")
    expect(page.locator("p.task-why")).to_contain_text("Next in line")
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/console/{HOST}/resize/{waiting.id}/")
    expect(page.locator("p.task-why")).to_be_visible()
    assert_fits(page)
    shoot(page, "why-waiting-phone")
    store.claim(HOST, "resize", settings=settings, worker="box-1")
    page.goto(f"{live_server.url}/console/{HOST}/resize/{first.id}/")
    expect(page.locator("h1")).to_contain_text("processing")
    expect(page.locator("p.task-why")).to_have_count(0)  # running: nothing to explain
