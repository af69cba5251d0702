"""An admin and an operator use the console in a real browser."""

import json

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from queues import stores
from queues.models import Queue
from queues.text.durations import readable_seconds

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/admin/login/?next=/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")


def test_the_words_an_admin_sees_while_typing_are_the_servers_words(page, live_server):
    # words.js is the one copy of queues/text/durations.py off the server: held to the same table
    User.objects.create_superuser("admin", password="a-long-admin-password")
    log_in(page, live_server, "admin", "a-long-admin-password")
    page.goto(f"{live_server.url}/admin/queues/queue/add/")
    cases = [0, 1, 59, 60, 61, 90, 3_599, 3_600, 3_661, 5_400, 86_399, 86_400, 90_061, 172_800,
             604_800, 31_536_000]  # fmt: skip
    said = page.evaluate("(cases) => cases.map(window.taskhoster.secondsInWords)", cases)
    assert said == [readable_seconds(n) for n in cases]


def test_admin_creates_a_queue_then_watches_a_task_on_the_dashboard(page, live_server, shoot):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    log_in(page, live_server, "admin", "a-long-admin-password")
    expect(page.locator("main")).to_contain_text("No queues yet")

    page.goto(f"{live_server.url}/admin/queues/host/add/")
    page.fill("#id_name", "task.example.com")
    page.click("input[name=_save]")
    page.goto(f"{live_server.url}/admin/queues/queue/add/")
    page.select_option("#id_host", label="task.example.com")
    page.fill("#id_name", "resize")
    page.fill("#id_lease_seconds", "90060")
    # The words beside a seconds field follow what is typed (words.js + seconds.js).
    expect(page.locator("#lease_seconds-words")).to_have_text("1 day 1 hour")
    page.fill("#id_lease_seconds", "30")
    expect(page.locator("#lease_seconds-words")).to_have_text("30 s")
    shoot(page, "queue-form")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    queue = Queue.objects.get(name="resize")
    assert queue.lease_seconds == 30

    page.goto(f"{live_server.url}/")
    row = page.locator('tr[data-queue="task.example.com/resize"]')
    assert row.locator('[data-field="pending"]').inner_text() == "0"
    where = ("task.example.com", "resize")
    task = stores.of(*where).post(*where, {"x": "<b>hi</b>"}, settings=queue.to_settings(),
                                  posted_by="admin").task  # fmt: skip
    # The dashboard refreshes itself: the new task shows up without a reload.
    expect(row.locator('[data-field="pending"]')).to_have_text("1", timeout=10_000)
    shoot(page, "dashboard")

    page.click("text=task.example.com/resize")
    page.click(f"text={task.id}")
    assert page.locator("pre.payload").first.inner_text().count("<b>hi</b>") == 1
    page.click("button:has-text('Cancel')")
    expect(page.locator(".messages")).to_contain_text("cancel done, now cancelled")
    assert (
        stores.of("task.example.com", "resize").read("task.example.com", "resize", task.id).status
        == "cancelled"
    )


def test_admin_creates_a_token_that_is_shown_once(page, live_server):
    User.objects.create_superuser("admin", password="a-long-admin-password")
    User.objects.create_user("box-1")
    log_in(page, live_server, "admin", "a-long-admin-password")
    page.wait_for_url(f"{live_server.url}/")
    page.goto(f"{live_server.url}/admin/queues/apitoken/add/")
    # The user field is the admin's autocomplete widget: type, then pick, as a person would.
    page.click(".field-user .select2-selection")
    page.fill(".select2-search__field", "box")
    page.click(".select2-results__option:has-text('box-1')")
    page.fill("#id_name", "worker box")
    page.click("input[name=_save]")
    expect(page.locator("#content-main")).to_contain_text("Copy it now")
    token = page.locator("#new-token").inner_text().strip()
    from queues.auth.tokens import find_token

    assert find_token(token).user.username == "box-1"
    # shown on the page that answered the save, and nowhere after it
    page.click("text=The token's page")
    assert token not in page.content()
    page.goto(f"{live_server.url}/admin/queues/apitoken/")
    assert token not in page.content()
    assert all(token not in cookie["value"] for cookie in page.context.cookies())


def test_operator_follows_a_task_to_its_log_timeline_and_opens_a_payload_in_a_new_tab(
    page, live_server, shoot
):
    from django.core.management import call_command

    from queues.services import save_queue

    User.objects.create_superuser("admin", password="a-long-admin-password")
    queue, _ = save_queue("task.example.com", "resize", archive_payloads=True)
    where = ("task.example.com", "resize")
    task = stores.of(*where).post(*where, {"url": "<script>x</script>"},
                                  settings=queue.to_settings(), posted_by="admin").task  # fmt: skip
    call_command("ingest_tasklogs", verbosity=0)

    log_in(page, live_server, "admin", "a-long-admin-password")
    expect(page.locator("main")).to_contain_text("task.example.com/resize")
    page.goto(f"{live_server.url}/console/task.example.com/resize/{task.id}/")
    page.click("text=Log timeline")
    expect(page.locator("table.tasklogs-timeline")).to_contain_text("posted")
    shoot(page, "timeline")

    link = page.locator("a:has-text('item')").first
    assert link.get_attribute("target") == "_blank"
    assert link.get_attribute("rel") == "noopener"
    # The payload opens in a new tab on a page that says what it is, its JSON as escaped text.
    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url.endswith(f"/logs/task.example.com/resize/{task.id}/payloads/item/view")
    expect(tab.locator("h1")).to_contain_text(f"The item of task {task.id}")
    assert json.loads(tab.locator("pre.payload-text").inner_text()) == {"url": "<script>x</script>"}
    shoot(tab, "payload-tab")
    # Its raw file, one click on: the JSON itself, shown as text and never run.
    tab.click("text=The raw JSON file")
    assert json.loads(tab.locator("body").inner_text()) == {"url": "<script>x</script>"}
    assert tab.url.endswith(f"/logs/task.example.com/resize/{task.id}/payloads/item")
