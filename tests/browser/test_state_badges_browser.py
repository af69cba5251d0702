"""Each state's badge in a real browser: on the queue page's tabs and the task page, at a
desktop's and a phone's width, the state named in its own colour."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from queues import stores
from queues.services import save_queue
from tests.browser.pages import DESKTOP, PHONE, assert_fits, staff_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOST, NAME = "task.example.com", "resize"


def one_task_in_each_state() -> dict[str, str]:
    queue, _ = save_queue(HOST, NAME)
    settings, store = queue.to_settings(), stores.of(HOST, NAME)

    def post(n: int) -> str:
        return store.post(HOST, NAME, {"n": n}, settings=settings, posted_by="app").task.id

    ids = {state: post(n) for n, state in enumerate(["finished", "failed", "processing"])}
    for _ in range(3):  # the oldest first: finished, failed, then the one left processing
        store.claim(HOST, NAME, settings=settings, worker="box-1")
    store.finish(HOST, NAME, ids["finished"], settings=settings, worker="box-1", attempt=1,
                 result={"ok": True})  # fmt: skip
    store.fail(HOST, NAME, ids["failed"], settings=settings, worker="box-1", attempt=1,
               result={"error": "no"})  # fmt: skip
    ids["cancelled"] = post(4)
    store.cancel(HOST, NAME, ids["cancelled"], settings=settings)
    ids["pending"] = post(5)
    return ids


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_each_state_has_a_named_badge_of_its_own_colour(browser, live_server, shoot, size):
    ids = one_task_in_each_state()
    page = staff_page(browser, live_server, size)
    backgrounds = {}
    for state, task_id in ids.items():
        page.goto(f"{live_server.url}/console/{HOST}/{NAME}/{task_id}/")
        badge = page.locator(".task-title .task-state")
        assert badge.inner_text() == state
        backgrounds[state] = badge.evaluate("e => getComputedStyle(e).backgroundColor")
        assert_fits(page)
    assert len(set(backgrounds.values())) == 5, backgrounds
    shoot(page, "task")
    for tab in ("all", "failed"):
        page.goto(f"{live_server.url}/console/{HOST}/{NAME}/")
        page.click(f'[data-tab="{tab}"]')
        # the tab's page loads after the click returns: wait for a badge (count() does not)
        expect(page.locator("#tasks .task-state").first).to_be_visible()
        assert_fits(page)
        shoot(page, tab)
    page.context.close()
