"""The admin's forms in a real browser: a new token copied with one click; the Add-queue form
offers no sweep preview for a queue that has no tasks yet, at a desktop's and a phone's width;
a date written as the console writes it, how long ago on hover."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from queues.auth.tokens import find_token
from queues.models import Host
from tests.browser.pages import DESKTOP, PHONE, assert_fits, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_new_token_is_copied_by_its_button(page, live_server, shoot):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    User.objects.create_user("box-1")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    log_in(page, live_server, "admin", "a-long-admin-password")
    page.goto(f"{live_server.url}/admin/queues/apitoken/add/")
    page.click(".field-user .select2-selection")
    page.fill(".select2-search__field", "box")
    page.click(".select2-results__option:has-text('box-1')")
    page.fill("#id_name", "worker box")
    page.click("input[name=_save]")
    page.click("button[data-copy=new-token]")
    expect(page.locator("#new-token-copied")).to_have_text("Copied.")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == page.locator("#new-token").inner_text().strip()
    assert find_token(copied).user.username == "box-1"
    shoot(page, "issued")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_adding_a_queue_offers_no_sweep_preview(browser, live_server, shoot, size):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    context = browser.new_context(viewport=size)
    page = context.new_page()
    log_in(page, live_server, "admin", "a-long-admin-password")
    page.goto(f"{live_server.url}/admin/queues/queue/add/")
    expect(page.locator("#id_name")).to_be_visible()
    assert page.locator("#id_confirm_sweep").count() == 0
    assert page.locator("input[name=_preview_sweep]").count() == 0
    shoot(page, "add-queue")
    context.close()


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_admins_dates_are_the_consoles_with_how_long_ago_on_hover(
    browser, live_server, shoot, size
):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    host = Host.objects.create(name="task.example.com")
    three_hours_ago = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=3)
    Host.objects.filter(pk=host.pk).update(created_at=three_hours_ago)
    written = f"{three_hours_ago:%Y-%m-%d %H:%M:%S} UTC"
    context = browser.new_context(viewport=size)
    page = context.new_page()
    log_in(page, live_server, "admin", "a-long-admin-password")
    page.goto(f"{live_server.url}/admin/queues/host/")
    moment = page.locator("#result_list time", has_text=written)
    expect(moment).to_have_attribute("title", "3 hours ago")
    assert moment.get_attribute("datetime") == three_hours_ago.isoformat().replace(
        "+00:00", ".000Z"
    )
    assert_fits(page)
    shoot(page, "hosts")
    context.close()


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_queue_access_inline_shows_user_group_and_role_on_the_screen(
    browser, live_server, shoot, size
):
    """At a phone's width the inline's Group and Role were off to the right, behind a scroll."""
    from queues.services import save_queue

    User.objects.create_superuser("admin", password="a-long-admin-password")
    queue, _ = save_queue("task.example.com", "thumbnails-for-the-very-long-named-gallery")
    context = browser.new_context(viewport=size)
    page = context.new_page()
    log_in(page, live_server, "admin", "a-long-admin-password")
    page.goto(f"{live_server.url}/admin/queues/queue/{queue.pk}/change/")
    row = page.locator("#access-0")
    row.scroll_into_view_if_needed()
    shoot(page, "queue-access")
    screen = page.evaluate("window.innerWidth")
    for field in ("user", "group", "role"):
        box = page.locator(f"#access-0 .field-{field}").bounding_box()
        assert box is not None and box["width"] > 0, field
        assert box["x"] >= 0 and box["x"] + box["width"] <= screen, (field, box, screen)
    context.close()
