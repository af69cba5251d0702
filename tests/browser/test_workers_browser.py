"""The workers page in a real browser, at a desktop's and a phone's width: each worker's row (a
card on a phone), the one gone quiet marked, and the page keeping itself fresh with no reload."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from queues import stores
from queues.services import save_queue
from tests.browser.pages import DESKTOP, PHONE, assert_fits, staff_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOST, NAME = "task.example.com", "thumbnails-for-the-very-long-named-gallery"
MIN = 60_000


def some_workers(store_dirs) -> None:
    """resize-box-1 holds a task; gone-quiet-box claimed ten minutes ago and went silent."""
    import time

    now = time.time_ns() // 1_000_000
    queue, _ = save_queue(HOST, NAME, lease_seconds=60)
    settings, store = queue.to_settings(), stores.of(HOST, NAME)
    for n in range(3):
        store.post(HOST, NAME, {"n": n}, settings=settings, posted_by="app", now=now - 11 * MIN)
    store.claim(HOST, NAME, settings=settings, worker="gone-quiet-box", now=now - 10 * MIN)
    store.claim(HOST, NAME, settings=settings, worker="resize-box-1.example.internal")
    call_command("ingest_tasklogs", "--source", str(store_dirs["logs"] / "tasks"),
                 stdout=io.StringIO())  # fmt: skip


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_workers_page_at_both_widths_and_live(browser, live_server, store_dirs, shoot, size):
    some_workers(store_dirs)
    page = staff_page(browser, live_server, size)
    for path in (f"/console/{HOST}/{NAME}/workers/", "/console/workers/"):
        page.goto(live_server.url + path)
        assert_fits(page)
        quiet = page.locator('tr[data-worker="gone-quiet-box"]')
        expect(quiet.locator(".worker-badge")).to_have_text("gone quiet")
        working = page.locator('tr[data-worker="resize-box-1.example.internal"]')
        expect(working.locator(".worker-badge")).to_have_text("working")
        display = working.evaluate("e => getComputedStyle(e).display")
        assert display == ("grid" if size is PHONE else "table-row")
        shoot(page, path.strip("/").replace("/", "-"))
    # a worker that claims now shows up within a refresh (5 s), with no reload
    queue_settings = save_queue(HOST, NAME)[0].to_settings()
    stores.of(HOST, NAME).claim(HOST, NAME, settings=queue_settings, worker="box-late")
    late = page.locator('tr[data-worker="box-late"] .worker-badge')
    expect(late).to_have_text("working", timeout=15_000)
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    page.context.close()
