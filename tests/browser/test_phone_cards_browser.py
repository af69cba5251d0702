"""At a phone's width (390 CSS px) the console's tables show each row as a card: no page, and no
table inside one, wider than the screen; at a desktop's width they stay tables."""

from __future__ import annotations

import io
import time

import pytest
from django.core.management import call_command

from queues import stores
from queues.services import save_queue
from tests.browser.pages import DESKTOP, PHONE, assert_fits, staff_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOST, NAME = "task.example.com", "thumbnails-for-the-very-long-named-gallery"


def some_work(store_dirs) -> str:
    """A queue with a finished task, a failed one and a pending one, its events ingested."""
    queue, _ = save_queue(HOST, NAME, max_attempts=1)
    settings, store = queue.to_settings(), stores.of(HOST, NAME)
    # two minutes ago: a result nobody read for a minute is on the insight page
    then = time.time_ns() // 1_000_000 - 120_000
    ids = [store.post(HOST, NAME, {"url": f"https://cdn.example/gallery/{n}/" + "x" * 60},
                      settings=settings, posted_by="app", now=then).task.id
           for n in range(3)]  # fmt: skip
    for _ in range(2):
        store.claim(HOST, NAME, settings=settings, worker="resize-box-1.example.internal",
                    now=then)  # fmt: skip
    store.finish(HOST, NAME, ids[0], settings=settings, now=then,
                 worker="resize-box-1.example.internal", attempt=1, result={"ok": 1})  # fmt: skip
    store.fail(HOST, NAME, ids[1], settings=settings, worker="resize-box-1.example.internal",
               attempt=1, result={"error": "OSError: " + "no space left " * 10},
               now=then)  # fmt: skip
    call_command("ingest_tasklogs", "--source", str(store_dirs["logs"] / "tasks"),
                 stdout=io.StringIO())  # fmt: skip
    return ids[1]


def tables_fit(page) -> None:
    """Every table and its box show all they hold: nothing to scroll to sideways."""
    wide = page.evaluate(
        "[...document.querySelectorAll('main table, main .table-scroll')]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className)"
    )
    assert wide == [], f"{page.url}: {wide} scroll sideways"


def row_display(page, selector: str) -> str:
    return page.locator(selector).first.evaluate("e => getComputedStyle(e).display")


PAGES = {
    "dashboard": ("/", "#queues tbody tr"),
    "queue": (f"/console/{HOST}/{NAME}/", "#tasks tbody tr"),
    "task-logs": ("/logs/", "table.tasklogs-events tbody tr"),
}


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_tables_become_cards_on_a_phone(browser, live_server, store_dirs, shoot, size):
    failed = some_work(store_dirs)
    page = staff_page(browser, live_server, size)
    pages = {
        **PAGES,
        "task": (f"/console/{HOST}/{NAME}/{failed}/", "table.attempts tbody tr"),
        "timeline": (f"/logs/{HOST}/{NAME}/{failed}/", "table.tasklogs-timeline tbody tr"),
        "insight": (f"/console/{HOST}/{NAME}/insight/", "table.insight tbody tr"),
        "insight-unread": (f"/console/{HOST}/{NAME}/insight/", "table.unread tbody tr"),
    }
    for name, (path, rows) in pages.items():
        page.goto(live_server.url + path)
        assert_fits(page)
        expected = "grid" if size is PHONE else "table-row"
        assert row_display(page, rows) == expected, name
        if size is PHONE:
            tables_fit(page)
        shoot(page, name)
    page.context.close()


def test_task_logs_on_a_phone_is_a_compact_card_per_event(browser, live_server, store_dirs, shoot):
    """50 events (a page of Task Logs) made a page 13,000 px tall at 390 px: a card of every
    field under its own label, empty ones too. Each event is now a few short lines."""
    queue, _ = save_queue(HOST, NAME, max_attempts=1)
    settings, store = queue.to_settings(), stores.of(HOST, NAME)
    for n in range(25):  # a post and a claim each: 50 events
        store.post(HOST, NAME, {"n": n}, settings=settings, posted_by="app")
        store.claim(HOST, NAME, settings=settings, worker="resize-box-1.example.internal")
    call_command("ingest_tasklogs", "--source", str(store_dirs["logs"] / "tasks"),
                 stdout=io.StringIO())  # fmt: skip
    page = staff_page(browser, live_server, PHONE)
    page.goto(f"{live_server.url}/logs/")
    assert_fits(page)
    rows = page.locator("table.tasklogs-events tbody tr")
    assert rows.count() == 50
    shoot(page, "task-logs")
    heights = rows.evaluate_all("rows => rows.map(r => r.getBoundingClientRect().height)")
    assert max(heights) <= 130, f"cards of {max(heights):.0f} px"
    page.context.close()
