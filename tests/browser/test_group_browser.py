"""An operator follows a group in a real browser: from a task's page to its group's page, which
shows the counts and a progress bar, lists the tasks, and links the callback once posted.
Screenshots at a desktop's and a phone's width."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from queues import stores
from queues.services import grant, save_queue
from queues.store import OnComplete
from tests.browser.pages import DESKTOP, PHONE, assert_fits, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOST = "task.example.com"


def test_an_operator_follows_a_group_to_its_callback(page, live_server, shoot):
    User.objects.create_user("olga", password="a-long-operator-password")
    queue, _ = save_queue(HOST, "resize")
    reports, _ = save_queue(HOST, "reports")
    for name in ("resize", "reports"):
        grant("olga", f"{HOST}/{name}", "operator")
    store, settings = stores.of(HOST, "resize"), queue.to_settings()
    closing = OnComplete(queue="reports", item={"report": 1}, settings=reports.to_settings())
    tasks = [store.post(HOST, "resize", {"n": i}, settings=settings, posted_by="alice",
                        group="nightly", on_complete=closing if i == 2 else None).task
             for i in range(3)]  # fmt: skip
    for task in store.claim(HOST, "resize", settings=settings, worker="box-1", max_tasks=2):
        store.finish(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=1,
                     result={})  # fmt: skip
    log_in(page, live_server, "olga", "a-long-operator-password")
    page.goto(f"{live_server.url}/console/{HOST}/resize/{tasks[2].id}/")
    page.click("a.group-link")
    expect(page.locator("h1")).to_contain_text("nightly")
    expect(page.locator("h1")).to_contain_text("closed")
    expect(page.locator("label[for=group-progress]")).to_have_text("2 of 3 tasks ended")
    assert page.locator("progress.group-bar").get_attribute("value") == "2"
    expect(page.locator("table.group-tasks tbody tr")).to_have_count(3)
    expect(page.locator("table.group-counts")).to_contain_text("into reports once every task")
    shoot(page, "group-closed-desktop")

    [last] = store.claim(HOST, "resize", settings=settings, worker="box-1")
    store.finish(HOST, "resize", last.id, settings=settings, worker="box-1", attempt=1, result={})
    page.reload()
    expect(page.locator("h1")).to_contain_text("called back")
    page.set_viewport_size(PHONE)
    assert_fits(page)
    shoot(page, "group-called-back-phone")
    page.set_viewport_size(DESKTOP)
    page.click("a.callback-link")
    expect(page.locator("h1")).to_contain_text("pending")
    expect(page.locator("pre.payload")).to_contain_text('"report": 1')

    page.goto(f"{live_server.url}/console/{HOST}/resize/groups/nosuch/")
    expect(page.locator("h1")).not_to_contain_text("nosuch")
