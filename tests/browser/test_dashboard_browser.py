"""The dashboard and the insight page in a real browser, at a desktop's and a phone's width."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from playwright.sync_api import expect

from queues import stores
from queues.services import grant, save_queue
from tests.browser.pages import DESKTOP, PHONE, assert_fits, log_in
from tests.console_events import lifecycle, now_ms

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
MIN = 60_000
LONG = "thumbnails-for-the-very-long-named-gallery"


def a_day_of_work() -> None:
    """Queues with a day of ingested events, one busy and failing, one never posted to."""
    queue, _ = save_queue("task.example.com", "resize")
    save_queue("task.example.com", LONG)
    save_queue("mail.example.com", "send")
    now = now_ms()
    for i in range(120):
        posted = now - (i * 11 + 3) * MIN
        ending = "failed" if i % 9 == 0 else "result"
        steps = [("claimed", 400 + i * 37), (ending, 5_000 + i * 211)]
        if i % 7:
            steps.append(("fetched", 6_000 + i * 300))
        lifecycle(f"{i:016x}", posted, *steps)
    for i in range(20):
        lifecycle(f"{i:016x}", now - (i * 40 + 5) * MIN, ("claimed", 900), ("result", 2_000),
                  ("fetched", 2_500), queue="send", host="mail.example.com")  # fmt: skip
    store = stores.of("task.example.com", "resize")
    for n in range(3):
        store.post("task.example.com", "resize", {"n": n}, settings=queue.to_settings(),
                   posted_by="admin")  # fmt: skip
    call_command("ingest_tasklogs", verbosity=0)


def test_the_dashboard_fits_a_desktop_and_a_phone_and_refreshes_itself(page, live_server, shoot):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    a_day_of_work()
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, "admin", "a-long-admin-password")
    row = page.locator('tr[data-queue="task.example.com/resize"]')
    expect(row.locator('[data-field="pending"]')).to_have_text("3")
    assert row.locator("svg.chart polyline.finished").count() == 1
    never = page.locator(f'tr[data-queue="task.example.com/{LONG}"]')
    expect(never).to_contain_text("never posted to")
    expect(never.locator('[data-field="oldest_pending_ms"]')).to_have_text("—")
    assert_fits(page)
    shoot(page, "desktop")

    # Refreshed in place: a new task shows without a reload.
    queue = save_queue("task.example.com", "resize")[0]
    where = ("task.example.com", "resize")
    stores.of(*where).post(*where, {"n": 9}, settings=queue.to_settings(), posted_by="admin")
    expect(row.locator('[data-field="pending"]')).to_have_text("4", timeout=15_000)
    # the refreshed cells carry the server's words, as the page came
    expect(never.locator('[data-field="oldest_pending_ms"]')).to_have_text("—")
    expect(row.locator('[data-field="failure_rate"]')).to_have_text(re.compile(r"^(\d+%|<1%|—)$"))
    expect(row.locator('[data-field="oldest_pending_ms"]')).to_have_text(
        re.compile(r"^\d+(\.\d)? (ms|s|min|hour|hours|day|days)( \d+ \w+)?$")
    )
    assert row.locator("svg.chart").count() == 1  # the chart redrawn from the refresh

    page.set_viewport_size(PHONE)
    page.reload()
    assert_fits(page)
    # The header spans the screen, and the navigation sits under the name, not over the title.
    header = page.locator("header.top").bounding_box()
    assert header["width"] >= PHONE["width"] - 1
    title = page.locator("h1").bounding_box()
    assert page.locator(".top-nav").bounding_box()["y"] + 1 < title["y"]
    # Each queue is a card: nothing to scroll sideways to (test_phone_cards_browser.py).
    box = page.locator(".table-scroll:has(#queues)")
    assert box.evaluate("el => el.scrollWidth <= el.clientWidth")
    assert (
        page.locator("#queues tbody tr").first.evaluate("e => getComputedStyle(e).display")
        == "grid"
    )
    # The table of recent failures is below it.
    expect(page.locator(".recent-failures tbody tr").first).to_be_visible()
    shoot(page, "phone")


def test_the_keyboard_reaches_the_content_first(page, live_server):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    save_queue("task.example.com", "resize")
    log_in(page, live_server, "admin", "a-long-admin-password")
    page.keyboard.press("Tab")
    skip = page.locator("a.skip")
    expect(skip).to_be_focused()
    assert skip.bounding_box()["x"] >= 0  # shown when focused
    assert skip.evaluate("el => getComputedStyle(el).outlineStyle") != "none"
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.textContent")
    assert "task.example.com" in focused  # the first queue's link, after the skip


def test_an_operator_reads_the_insight_page_on_a_desktop_and_a_phone(page, live_server, shoot):
    User.objects.create_user("olga", password="a-long-operator-password")
    a_day_of_work()
    grant("olga", "task.example.com/resize", "operator")
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, "olga", "a-long-operator-password")
    expect(page.locator("#queues tbody tr")).to_have_count(1)
    page.click("text=insight")
    page.wait_for_url("**/console/task.example.com/resize/insight/")
    expect(page.locator('tr[data-measure="wait"] td').first).not_to_have_text("—")
    expect(page.locator("table.unread")).to_be_visible()
    assert_fits(page)
    shoot(page, "desktop")
    page.set_viewport_size(PHONE)
    page.reload()
    assert_fits(page)
    shoot(page, "phone")
    # A result nobody read opens its Task Logs timeline.
    page.locator("table.unread a").first.click()
    expect(page.locator("table.tasklogs-timeline")).to_contain_text("result")
    assert_fits(page)
    shoot(page, "timeline-phone")


def test_the_other_pages_fit_a_phone_too(page, live_server, shoot):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    a_day_of_work()
    task = (
        stores.of("task.example.com", "resize")
        .list_tasks("task.example.com", "resize", limit=1)
        .tasks[0]
    )
    page.set_viewport_size(PHONE)
    log_in(page, live_server, "admin", "a-long-admin-password")
    for name, path in [
        ("logs", "/logs/"),
        ("queue", "/console/task.example.com/resize/"),
        ("task", f"/console/task.example.com/resize/{task.id}/"),
        ("empty-insight", f"/console/task.example.com/{LONG}/insight/"),
    ]:
        page.goto(live_server.url + path)
        assert_fits(page)
        shoot(page, name)


def test_the_admin_queue_list_fits_a_desktop_and_links_to_the_console(page, live_server, shoot):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    for name in ("resize", "send-mail", LONG):
        save_queue("task.example.com", name, public_post=True, archive_payloads=True)
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, "admin", "a-long-admin-password", then="/admin/queues/queue/")
    results = page.locator("#changelist .results")
    assert results.evaluate("el => el.scrollWidth <= el.clientWidth"), "columns cut off"
    expect(page.locator("#site-name")).to_have_text("taskhoster")
    shoot(page, "changelist")
    page.click("text=task.example.com/resize")
    expect(page.locator("#id_queue_seconds + .seconds-words")).to_have_text("1 day")
    page.fill("#id_queue_seconds", "5400")
    expect(page.locator("#id_queue_seconds + .seconds-words")).to_have_text("1 hour 30 min")
    assert page.locator("#id_item_schema").input_value() == ""
    shoot(page, "queue-form")
    page.click("text=Open in the console")
    page.wait_for_url(f"{live_server.url}/console/task.example.com/resize/")
    page.goto(f"{live_server.url}/admin/")
    page.click(".taskhoster-links >> text=Console")
    page.wait_for_url(f"{live_server.url}/")


def test_the_api_docs_show_real_bodies_and_lead_back_to_the_console(page, live_server, shoot):
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/api/v1/docs/")
    description = page.locator(".information-container .description")
    expect(description).to_contain_text("epoch milliseconds")
    page.locator(".opblock-summary:has-text('Post a task')").click()
    body = page.locator(".opblock.is-open .body-param__example, .opblock.is-open .example")
    expect(body.first).to_contain_text("cat.jpg")
    page.locator("#operations-queues-claim .opblock-summary").click()
    claim = page.locator("#operations-queues-claim")
    expect(claim).to_contain_text("cat.jpg")  # the claimed task's item, in the 200 answer
    for opened in page.locator(".opblock.is-open").all():
        expect(opened).not_to_contain_text("additionalProp1")
    page.locator(
        "#operations-queues-claim .opblock-summary"
    ).click()  # closed again: a shorter shot
    page.locator("#operations-queues-post_task .opblock-summary").click()
    shoot(page, "docs")
    back = description.locator("a:has-text('Back to the console')")
    assert back.get_attribute("href") == "/"
