"""A failed task read in a real browser at a desktop's and a phone's width: the traceback wraps
inside its box on the task page and the payload page, and the lists give its first line."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from queues import stores
from queues.services import save_queue
from tasklogs.links import payload_url
from tests.browser.pages import DESKTOP, PHONE, assert_fits, staff_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOST = "task.example.com"
LONG_LINE = "ValueError: " + "the-image-at-/srv/uploads/2026/12/01/" * 8 + " is not a PNG"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/resize.py", line 12, in handle\n'
    "    raise ValueError(path)\n" + LONG_LINE
)


def a_failed_task(store_dirs) -> str:
    queue, _ = save_queue(HOST, "resize", archive_payloads=True, max_attempts=1)
    settings, store = queue.to_settings(), stores.of(HOST, "resize")
    task = store.post(HOST, "resize", {"path": "/srv/uploads/x"}, settings=settings,
                      posted_by="admin").task  # fmt: skip
    store.claim(HOST, "resize", settings=settings, worker="box-1")
    body = {"error": LONG_LINE, "type": "ValueError", "traceback": TRACEBACK}
    store.fail(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=1, result=body)
    call_command("ingest_tasklogs", "--source", str(store_dirs["logs"] / "tasks"),
                 stdout=io.StringIO())  # fmt: skip
    return task.id


def assert_wraps(box) -> None:
    """The box shows all of each line: nothing runs past its right edge to be scrolled to."""
    wide, shown = box.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert wide <= shown, f"{wide} px of text in a {shown} px box"


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_traceback_reads_as_wrapped_lines(browser, live_server, store_dirs, shoot, size):
    task_id = a_failed_task(store_dirs)
    page = staff_page(browser, live_server, size)

    page.goto(f"{live_server.url}/console/{HOST}/resize/{task_id}/")
    failure = page.locator("pre.payload.readable").nth(1)
    assert "    raise ValueError(path)\n" in failure.inner_text()  # lines, not "\n" in a string
    assert_wraps(failure)
    assert_fits(page)
    shoot(page, "task")

    page.goto(live_server.url + payload_url(HOST, "resize", task_id, "result", attempts=1,
                                            event="failed"))  # fmt: skip
    shown = page.locator("pre.payload-text")
    assert "    raise ValueError(path)\n" in shown.inner_text()
    assert_wraps(shown)
    assert_fits(page)
    shoot(page, "payload")

    page.goto(f"{live_server.url}/logs/?task={task_id}")
    assert page.locator("td.tasklogs-error").first.inner_text().startswith("ValueError: the-image")
    shoot(page, "task-logs")

    page.goto(f"{live_server.url}/")
    assert "failed: ValueError: the-image" in page.locator(".recent-failures").inner_text()
    shoot(page, "dashboard")
    page.context.close()


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_every_attempts_error_and_the_end_in_words_after_a_retry(
    browser, live_server, store_dirs, shoot, size
):
    """Issue 36, items 1 and 5: each failed attempt keeps its own line on the task page and in
    Task Logs after an operator's retry (no archive), and the end reads "attempts used up
    (2 of 2)", one Failure box, not "error: attempts"."""
    queue, _ = save_queue(HOST, "resize", max_attempts=2, backoff_seconds=1)
    settings, store = queue.to_settings(), stores.of(HOST, "resize")
    task = store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by="admin").task
    now = task.posted_at
    for attempt in (1, 2, 3, 4):
        if attempt == 3:
            store.retry(HOST, "resize", task.id, settings=settings, by="sam", now=now + 2)
        now = max(store.read(HOST, "resize", task.id).available_at, now + 1000)
        store.claim(HOST, "resize", settings=settings, worker=f"box-{attempt}", now=now)
        store.fail(HOST, "resize", task.id, settings=settings, worker=f"box-{attempt}",
                   attempt=attempt, retry=True, now=now + 1,
                   result={"error": f"OSError: disk {attempt} is full"})  # fmt: skip
    call_command("ingest_tasklogs", "--source", str(store_dirs["logs"] / "tasks"),
                 stdout=io.StringIO())  # fmt: skip
    page = staff_page(browser, live_server, size)
    page.goto(f"{live_server.url}/console/{HOST}/resize/{task.id}/")
    how = [cell.inner_text() for cell in page.locator('td[data-label="how"]').all()]
    assert [line.split(": ", 1)[1] for line in how] == [
        f"OSError: disk {attempt} is full" for attempt in (1, 2, 3, 4)
    ]
    assert page.locator("table.record").inner_text().count("attempts used up (4 of 4)") == 1
    assert page.locator("h2", has_text="Last failure before the retry").count() == 0
    assert_fits(page)
    shoot(page, "task")
    page.goto(f"{live_server.url}/logs/?task={task.id}")
    errors = [e.inner_text() for e in page.locator("td.tasklogs-error").all() if e.inner_text()]
    assert errors == [f"OSError: disk {attempt} is full" for attempt in (4, 3, 2, 1)]
    assert_fits(page)
    shoot(page, "task-logs")
    page.context.close()
