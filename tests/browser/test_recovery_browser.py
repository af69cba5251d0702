"""An operator recovers tasks in a real browser: opens a failed task, edits its item and retries
it; re-posts a task the store has cleaned from its archive, on Task Logs' page; retries now a
task waiting out its backoff. Screenshots of each page at a desktop's and a phone's width."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from playwright.sync_api import expect

from queues import stores
from queues.services import grant, save_queue
from tests.browser.pages import DESKTOP, PHONE, assert_fits, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOST = "task.example.com"
SCHEMA = {"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}}}


def both_widths(page, shoot, name: str) -> None:
    """A screenshot at each width; at the phone's, nothing is wider than the screen."""
    page.set_viewport_size(DESKTOP)
    shoot(page, f"{name}-desktop")
    page.set_viewport_size(PHONE)
    assert_fits(page)
    shoot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


@pytest.fixture
def operator():
    User.objects.create_user("olga", password="a-long-operator-password")
    queue, _ = save_queue(HOST, "resize", archive_payloads=True, item_schema=SCHEMA)
    grant("olga", f"{HOST}/resize", "operator")
    return queue


def failed_task(queue, item):
    store, settings = stores.of(HOST, "resize"), queue.to_settings()
    task = store.post(HOST, "resize", item, settings=settings, posted_by="alice").task
    store.claim(HOST, "resize", settings=settings, worker="box-1")
    store.fail(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=1,
               result={"why": "no such host: htp"})  # fmt: skip
    return task


def test_an_operator_edits_a_failed_tasks_item_and_retries_it(page, live_server, shoot, operator):
    task = failed_task(operator, {"url": "htp://example.com/a.png"})
    call_command("ingest_tasklogs", verbosity=0)
    log_in(page, live_server, "olga", "a-long-operator-password")
    page.goto(f"{live_server.url}/console/{HOST}/resize/{task.id}/")
    expect(page.locator("h1")).to_contain_text("failed")
    expect(page.locator("table.attempts")).to_contain_text("box-1")
    both_widths(page, shoot, "failed-task")

    page.click("summary:has-text('Edit the item, then retry')")
    # a wrong edit first: the page says why and keeps what was typed
    page.fill("#edit-item", '{"url": 5}')
    page.click("button:has-text('Save the item and retry')")
    expect(page.locator("#edit-error")).to_contain_text("invalid_item")
    assert page.input_value("#edit-item") == '{"url": 5}'
    both_widths(page, shoot, "edit-refused")

    page.fill("#edit-item", '{"url": "http://example.com/a.png"}')
    page.click("button:has-text('Save the item and retry')")
    expect(page.locator(".messages")).to_contain_text("item edited and retried, now pending")
    expect(page.locator("h1")).to_contain_text("pending")
    expect(page.locator("pre.payload").first).to_contain_text("http://example.com/a.png")
    now = stores.of(HOST, "resize").read(HOST, "resize", task.id)
    assert now.item == {"url": "http://example.com/a.png"} and now.status == "pending"

    call_command("ingest_tasklogs", verbosity=0)
    page.reload()
    expect(page.locator(".operator-events")).to_contain_text("retried with an edited item by olga")
    both_widths(page, shoot, "retried")
    page.click("text=Log timeline")
    row = page.locator("table.tasklogs-timeline tr", has_text="retried")
    expect(row).to_contain_text("item edited")
    expect(row).to_contain_text("olga")
    both_widths(page, shoot, "timeline")


def test_an_operator_reposts_a_cleaned_task_from_its_archive(page, live_server, shoot, operator):
    old = failed_task(operator, {"url": "http://example.com/b.png"})
    settings = operator.to_settings()
    # retention ends: the sweep deletes the task from the store; its log and archive stay
    report = stores.of(HOST, "resize").sweep_queue(HOST, "resize", settings,
                         now=stores.of(HOST, "resize").read(HOST, "resize", old.id).finished_at
                         + settings.retain_seconds * 1000 + 1)  # fmt: skip
    assert report.cleaned == 1
    call_command("ingest_tasklogs", verbosity=0)

    log_in(page, live_server, "olga", "a-long-operator-password")
    page.goto(f"{live_server.url}/logs/{HOST}/resize/{old.id}/")
    expect(page.locator(".tasklogs-now")).to_contain_text("No longer in the store")
    both_widths(page, shoot, "cleaned-timeline")
    link = page.locator("a:has-text('item')").first
    assert (link.get_attribute("target"), link.get_attribute("rel")) == ("_blank", "noopener")
    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    tab.wait_for_load_state()
    assert json.loads(tab.locator("pre.payload-text").inner_text()) == {
        "url": "http://example.com/b.png"
    }

    page.click("button:has-text('Re-post as a new task')")
    expect(page.locator(".messages")).to_contain_text(f"Re-posted {old.id} as the new task")
    [new] = stores.of(HOST, "resize").list_tasks(HOST, "resize").tasks
    assert new.id != old.id and new.reposted_from == old.id
    assert new.item == {"url": "http://example.com/b.png"}
    expect(page.locator("h1")).to_contain_text(new.id)
    expect(page.locator("table.record")).to_contain_text(f"re-post of {old.id}")
    both_widths(page, shoot, "reposted")
    page.click(f"a:has-text('{old.id}')")
    expect(page.locator("h1")).to_contain_text(old.id)


def test_an_admin_previews_the_sweep_before_shortening_retention(page, live_server, shoot):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    queue, _ = save_queue(HOST, "resize", retain_seconds=86400)
    done = failed_task(queue, {"url": "http://example.com/c.png"})
    log_in(page, live_server, "admin", "a-long-admin-password")
    page.goto(f"{live_server.url}/admin/queues/queue/{queue.pk}/change/")
    page.fill("#id_retain_seconds", "0")
    page.click("input[name=_preview_sweep]")
    expect(page.locator(".errornote, .errorlist").first).to_be_visible()
    expect(page.locator("body")).to_contain_text("Preview only: nothing was saved.")
    row = page.locator(".sweep-preview tr", has_text="delete (retention over)")
    expect(row).to_contain_text(done.id)
    shoot(page, "sweep-preview-desktop")
    page.set_viewport_size(PHONE)
    shoot(page, "sweep-preview-phone")
    page.set_viewport_size(DESKTOP)
    queue.refresh_from_db()
    assert queue.retain_seconds == 86400
    # saving asks for the tick, then saves
    page.click("input[name=_save]")
    expect(page.locator("body")).to_contain_text("Tick “Save even so” to save them.")
    page.check("#id_confirm_sweep")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    queue.refresh_from_db()
    assert queue.retain_seconds == 0 and stores.of(HOST, "resize").read(HOST, "resize", done.id)


def test_an_operator_retries_now_a_task_waiting_out_its_backoff(page, live_server, shoot, operator):
    store, settings = stores.of(HOST, "resize"), operator.to_settings()
    task = store.post(HOST, "resize", {"url": "http://example.com/a.png"}, settings=settings,
                      posted_by="alice").task  # fmt: skip
    store.claim(HOST, "resize", settings=settings, worker="box-1")
    an_hours_backoff = replace(settings, backoff_seconds=3600)
    store.fail(HOST, "resize", task.id, settings=an_hours_backoff, worker="box-1", attempt=1,
               result={"why": "busy"}, retry=True)  # fmt: skip
    log_in(page, live_server, "olga", "a-long-operator-password")
    page.goto(f"{live_server.url}/console/{HOST}/resize/{task.id}/")
    expect(page.locator("h1")).to_contain_text("pending")
    button = page.locator("button:has-text('Retry now')")
    expect(button).to_be_visible()
    both_widths(page, shoot, "waiting")

    button.click()
    expect(page.locator(".messages")).to_contain_text("hasten done, now pending")
    expect(page.locator("button:has-text('Retry now')")).to_have_count(0)  # nothing to wait out
    assert store.read(HOST, "resize", task.id).available_at == 0
    [claimed] = store.claim(HOST, "resize", settings=settings, worker="box-2")
    assert (claimed.id, claimed.attempts) == (task.id, 2)
    call_command("ingest_tasklogs", verbosity=0)
    page.reload()
    expect(page.locator(".operator-events")).to_contain_text("hastened by olga")
    both_widths(page, shoot, "hastened")
