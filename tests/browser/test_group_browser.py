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
    expect(page.locator(".group-ended")).to_have_text("2 of 3 tasks ended")
    expect(page.locator(".group-bar")).to_have_attribute("aria-label", "2 finished, 1 running")
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


def test_the_queue_page_lists_its_groups_and_a_failed_member_shows_as_failed(
    page, live_server, shoot
):
    """Issue 36, item 7: groups could not be found from the queue page, and a group's bar was
    all one colour with a failed member."""
    User.objects.create_user("olga", password="a-long-operator-password")
    queue, _ = save_queue(HOST, "resize", max_attempts=1)
    grant("olga", f"{HOST}/resize", "operator")
    store, settings = stores.of(HOST, "resize"), queue.to_settings()
    for group, n in (("nightly", 4), ("backfill-2026", 2)):
        for i in range(n):
            store.post(HOST, "resize", {"n": i}, settings=settings, posted_by="alice", group=group)
    # the claims take nightly's four (post order): two finish, two fail; backfill's wait
    claimed = store.claim(HOST, "resize", settings=settings, worker="box-1", max_tasks=4)
    assert {task.group for task in claimed} == {"nightly"}
    for i, task in enumerate(claimed):
        if i < 2:
            store.finish(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=1,
                         result={})  # fmt: skip
        else:
            store.fail(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=1,
                       result={"error": "the command exited with status 3: no such file: "
                               + "a" * 70 + ".png"})  # fmt: skip
    log_in(page, live_server, "olga", "a-long-operator-password")
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/console/{HOST}/resize/")
    rows = page.locator("table.queue-groups tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("backfill-2026")  # by name
    night = rows.filter(has_text="nightly")
    expect(night).to_contain_text("4 of 4")
    expect(night.locator(".group-bar")).to_have_attribute("aria-label", "2 finished, 2 failed")
    part = night.locator(".group-part.part-failed")
    expect(part).to_have_attribute("title", "2 failed")
    assert part.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(179, 38, 30)"
    whole = night.locator(".group-bar").evaluate("e => e.clientWidth")
    assert abs(part.bounding_box()["width"] - whole / 2) <= 1  # half the members: half the bar
    expect(rows.nth(0).locator(".group-bar")).to_have_attribute("aria-label", "2 running")
    page.locator("#groups").scroll_into_view_if_needed()
    shoot(page, "queue-groups-desktop")
    page.set_viewport_size(PHONE)
    page.reload()
    assert_fits(page)
    page.locator("#groups").scroll_into_view_if_needed()
    shoot(page, "queue-groups-phone")
    page.set_viewport_size(DESKTOP)
    night = page.locator("table.queue-groups tbody tr").filter(has_text="nightly")
    night.locator("a.group-link").click()
    expect(page.locator("h1")).to_contain_text("nightly")
    expect(page.locator(".group-bar .part-failed")).to_have_attribute("title", "2 failed")
    shoot(page, "group-with-a-failure-desktop")
