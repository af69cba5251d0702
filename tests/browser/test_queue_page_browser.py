"""An operator on the queue page in a real browser: tasks posted through the API, found by a
search on their item, cancelled all at once by that filter after seeing how many; at a desktop's
and at a phone's width, where nothing may be wider than the screen."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from queues import stores
from queues.auth.tokens import issue_token
from queues.services import grant, save_queue
from tests.browser.pages import DESKTOP, PHONE, assert_fits, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOST, NAME = "task.example.com", "thumbnails-for-the-very-long-named-gallery"


def apart(page, one: str, other: str) -> bool:
    """Whether two elements' boxes do not overlap (the pause button once sat on the filter)."""
    a, b = page.locator(one).bounding_box(), page.locator(other).bounding_box()
    assert a and b
    return (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
            or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])  # fmt: skip


def post_through_the_api(page, live_server, token: str, items: list[dict]) -> list[str]:
    ids = []
    for item in items:
        answer = page.request.post(
            f"{live_server.url}/api/v1/queues/{HOST}/{NAME}/tasks",
            data=item,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        assert answer.status == 201, answer.text()
        ids.append(answer.json()["id"])
    return ids


def test_an_operator_finds_tasks_by_their_item_and_cancels_them_all_by_filter(
    page, live_server, shoot
):
    save_queue(HOST, NAME)
    User.objects.create_user("olga", password="a-long-operator-password")
    grant("olga", f"{HOST}/{NAME}", "operator")
    producer = User.objects.create_user("app")
    grant("app", f"{HOST}/{NAME}", "producer")
    _, token = issue_token(producer, "app")
    wanted = post_through_the_api(page, live_server, token, [
        {"url": f"https://cdn.example/broken/{i}.png", "sizes": [64, 256]} for i in range(7)
    ])  # fmt: skip
    kept = post_through_the_api(page, live_server, token, [
        {"url": f"https://cdn.example/fine/{i}.png", "note": "<script>alert(1)</script>"}
        for i in range(5)
    ])  # fmt: skip

    page.set_viewport_size(DESKTOP)
    log_in(page, live_server, "olga", "a-long-operator-password", then=f"/console/{HOST}/{NAME}/")
    expect(page.locator('[data-tab="pending"] .count')).to_have_text("12")
    assert page.locator("#tasks tbody tr").count() == 12
    expect(page.locator("#tasks")).to_contain_text("<script>alert(1)</script>")  # as text
    assert_fits(page)
    assert apart(page, "button:has-text('Pause claims')", "form.filters")
    shoot(page, "desktop")

    # A malformed search says what is wrong, and lists nothing to act on.
    page.fill('input[name="q"]', "item.url like broken")
    page.keyboard.press("Enter")
    expect(page.locator("#search-error")).to_contain_text("after the field comes contains")
    assert page.locator('button[value="cancel:filter"]').count() == 0

    # Keyboard only: the search box, then Enter; the state's tab keeps the search.
    page.fill('input[name="q"]', "item.url contains /broken/")
    page.keyboard.press("Enter")
    expect(page.locator("#tasks tbody tr")).to_have_count(7)
    assert page.locator('button[value="cancel:filter"]').count() == 0  # on "all": pick a state
    page.click('[data-tab="pending"]')
    expect(page.locator("#tasks tbody tr")).to_have_count(7)
    page.locator('button[value="cancel:filter"]').click()
    expect(page.locator("h1")).to_have_text("Cancel 7 tasks?")
    expect(page.locator("[data-count]")).to_have_text("7")
    shoot(page, "confirm")
    assert {stores.of(HOST, NAME).read(HOST, NAME, i).status for i in wanted} == {"pending"}
    page.keyboard.press("Enter")  # the confirm button has the focus
    expect(page.locator(".messages")).to_contain_text("cancel: 7 done, 0 refused.")
    assert {stores.of(HOST, NAME).read(HOST, NAME, i).status for i in wanted} == {"cancelled"}
    assert {stores.of(HOST, NAME).read(HOST, NAME, i).status for i in kept} == {"pending"}

    page.click('[data-tab="cancelled"]')
    expect(page.locator('[data-tab="cancelled"] .count')).to_have_text("7")
    expect(page.locator('[data-tab="pending"] .count')).to_have_text("5")

    # Ticked tasks: select all on the page, then retry them.
    page.fill('input[name="q"]', "")
    page.keyboard.press("Enter")
    expect(page.locator("#tasks tbody tr")).to_have_count(7)
    expect(page.locator('button[value="retry:selected"]')).to_be_disabled()  # nothing ticked
    page.check("#pick-all")
    page.locator('button[value="retry:selected"]').click()
    expect(page.locator("h1")).to_have_text("Retry 7 tasks?")
    page.click("button:has-text('Retry 7 tasks')")
    expect(page.locator(".messages")).to_contain_text("retry: 7 done, 0 refused.")

    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/console/{HOST}/{NAME}/")
    expect(page.locator("details.settings-glance dl")).to_be_visible()  # open by default
    assert_fits(page)
    assert apart(page, "button:has-text('Pause claims')", "form.filters")
    scroller = page.locator(".table-scroll")
    assert scroller.evaluate("e => e.scrollWidth <= e.clientWidth")  # each task a card instead
    shoot(page, "phone")
