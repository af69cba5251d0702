"""The dashboard: who sees which queue, its counts from the store and from Task Logs, its
charts, its empty states and the notice that Task Logs is behind."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from queues import stores
from queues.console.activity import Activity, activity
from queues.console.charts import activity_chart

from .console_events import event, lifecycle, now_ms, store
from .test_console import client_for, post

pytestmark = pytest.mark.django_db
MIN = 60_000


def rows(client: Client) -> dict[str, dict]:
    data = client.get("/console/queues.json").json()
    return {f"{q['host']}/{q['queue']}": q for q in data["queues"]}


# --- who sees what -----------------------------------------------------------------------


def test_staff_see_every_queue(resize, other):
    client = client_for("sam", is_staff=True)
    page = client.get("/").content.decode()
    assert "task.example.com/<wbr>resize" in page and "other.example.com/<wbr>secret" in page
    assert set(rows(client)) == {"task.example.com/resize", "other.example.com/secret"}


def test_an_operator_sees_only_the_queue_operated(resize, other):
    client = client_for("olga", role="operator", queue=resize)
    page = client.get("/").content.decode()
    assert "task.example.com/<wbr>resize" in page and "secret" not in page
    assert set(rows(client)) == {"task.example.com/resize"}


def test_the_operator_of_another_queue_sees_nothing_of_this_one(resize, other):
    client = client_for("oscar", role="operator", queue=other)
    assert "resize" not in client.get("/").content.decode()
    assert set(rows(client)) == {"other.example.com/secret"}


@pytest.mark.parametrize("role", [None, "producer", "worker"])
def test_a_user_without_the_operator_role_sees_no_queue(resize, role):
    client = client_for("pat", role=role, queue=resize)
    page = client.get("/").content.decode()
    assert "resize" not in page and "You operate no queue yet" in page
    assert rows(client) == {}


@pytest.mark.parametrize("path", ["/", "/console/queues.json"])
def test_anonymous_users_are_sent_to_log_in(resize, path):
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


# --- counts ------------------------------------------------------------------------------


def test_store_counts_split_pending_into_delayed_and_retrying(resize):
    store_ = stores.of("task.example.com", "resize")
    settings = resize.to_settings()
    post(resize)
    store_.post("task.example.com", "resize", {"n": 2}, settings=settings, posted_by=None,
                delay_seconds=3_600)  # fmt: skip
    assert store_.claim("task.example.com", "resize", settings=settings, worker="box-1")
    row = rows(client_for("sam", is_staff=True))["task.example.com/resize"]
    assert (row["pending"], row["delayed"], row["retrying"], row["processing"]) == (1, 1, 0, 1)
    page = client_for("sue", is_staff=True).get("/").content.decode()
    assert "1 delayed" in page


def test_finished_failed_and_cancelled_come_from_the_ingested_events(resize):
    store_, settings = stores.of("task.example.com", "resize"), resize.to_settings()
    done = post(resize)
    store_.cancel("task.example.com", "resize", done.id, settings=settings)
    client = client_for("sam", is_staff=True)
    row = rows(client)["task.example.com/resize"]
    # The store keeps the cancelled task; Task Logs has not ingested its events yet.
    assert row["done"] == 1 and row["cancelled_day"] == 0
    call_command("ingest_tasklogs", verbosity=0)
    row = rows(client)["task.example.com/resize"]
    assert (row["posted_day"], row["cancelled_day"], row["finished_day"]) == (1, 1, 0)


def test_last_day_counts_and_last_hour_rates(resize):
    now = now_ms()
    for i in range(3):
        lifecycle(f"{i:016x}", now - 10 * MIN, ("claimed", 1000), ("result", 2000))
    lifecycle("a" * 16, now - 20 * MIN, ("claimed", 1000), ("failed", 2000))
    lifecycle("b" * 16, now - 5 * 60 * MIN, ("claimed", 1000), ("failed", 2000))
    lifecycle("c" * 16, now - 25 * 60 * MIN, ("claimed", 1000), ("result", 2000))  # too old
    store(event("result", "d" * 16, now - 10 * MIN, queue="other"))  # another queue
    row = rows(client_for("sam", is_staff=True))["task.example.com/resize"]
    assert (row["posted_day"], row["finished_day"], row["failed_day"]) == (5, 3, 2)
    assert row["ended_last_hour"] == 4
    assert row["failure_rate"] == pytest.approx(0.25)
    page = client_for("sue", is_staff=True).get("/").content.decode()
    assert ">25%<" in page


def test_an_empty_queue_has_no_oldest_pending_task(resize):
    task = post(resize)
    stores.of("task.example.com", "resize").cancel(
        "task.example.com", "resize", task.id, settings=resize.to_settings()
    )
    client = client_for("sam", is_staff=True)
    assert rows(client)["task.example.com/resize"]["oldest_pending_ms"] is None
    cell = client.get("/").content.decode().split('data-field="oldest_pending_ms">')[1]
    assert cell.startswith("—<") and "0 ms" not in cell.split("</td>")[0]


def test_a_pending_task_has_an_age(resize):
    post(resize)
    row = rows(client_for("sam", is_staff=True))["task.example.com/resize"]
    assert row["oldest_pending_ms"] is not None and row["oldest_pending_ms"] >= 0


def test_a_postgres_queue_counts_from_its_store_and_its_event_rows(pg_store, make_queue):
    queue = make_queue("task.example.com", "resize", store="postgres")
    key = ("task.example.com", "resize")
    store_, settings = stores.of(*key), queue.to_settings()
    post(queue)
    store_.post(*key, {"n": 2}, settings=settings, posted_by=None, delay_seconds=3_600)
    assert store_.claim(*key, settings=settings, worker="box-1")
    ended = post(queue)
    store_.cancel(*key, ended.id, settings=settings)
    row = rows(client_for("sam", is_staff=True))["task.example.com/resize"]
    assert (row["pending"], row["delayed"], row["processing"], row["done"]) == (1, 1, 1, 1)
    if pg_store.shares_console_db:  # its events are Task Logs' rows: counted with no ingestion
        assert (row["posted_day"], row["cancelled_day"]) == (3, 1)


# --- empty states ------------------------------------------------------------------------


def test_staff_without_queues_are_offered_to_create_one():
    page = client_for("root", is_staff=True, is_superuser=True).get("/").content.decode()
    assert "No queues yet" in page
    assert 'href="/admin/queues/queue/add/"' in page


def test_staff_without_the_add_permission_get_no_create_link():
    page = client_for("sam", is_staff=True).get("/").content.decode()
    assert "No queues yet" in page and "/admin/queues/queue/add/" not in page


def test_a_queue_never_posted_to_says_so(resize):
    client = client_for("sam", is_staff=True)
    row = rows(client)["task.example.com/resize"]
    assert row["never_posted"] is True and row["pending"] == 0 and row["done"] == 0
    page = client.get("/").content.decode()
    assert '<span data-field="never_posted"> · never posted to</span>' in page
    post(resize)
    assert rows(client)["task.example.com/resize"]["never_posted"] is False
    page = client.get("/").content.decode()
    assert '<span data-field="never_posted" hidden> · never posted to</span>' in page


# --- the ingester-not-running notice ------------------------------------------------------


def test_the_notice_shows_when_logged_events_wait_uningested(resize):
    stores.of("task.example.com", "resize").post("task.example.com", "resize", {"n": 1},
                     settings=resize.to_settings(), posted_by=None,
                     now=now_ms() - 10 * MIN)  # fmt: skip
    client = client_for("sam", is_staff=True)
    page = client.get("/").content.decode()
    notice = page.split('id="ingest-lag"')[1].split("</p>")[0]
    assert " hidden>" not in notice.split("\n")[0]
    assert "manage.py ingest_tasklogs --follow" in notice
    lag = client.get("/console/queues.json").json()["ingest_lag"]
    assert lag["command"] == "manage.py ingest_tasklogs --follow"
    assert lag["oldest_t"] <= now_ms() // 1000 - 10 * 60

    call_command("ingest_tasklogs", verbosity=0)
    page = client.get("/").content.decode()
    assert 'id="ingest-lag" role="status" hidden>' in page
    assert client.get("/console/queues.json").json()["ingest_lag"] is None


def test_fresh_events_are_not_yet_a_lag(resize):
    post(resize)  # logged just now: a running follower would take it within a second
    page = client_for("sam", is_staff=True).get("/").content.decode()
    assert 'id="ingest-lag" role="status" hidden>' in page


# --- charts ------------------------------------------------------------------------------


def test_the_chart_is_svg_that_escapes_the_name():
    day = Activity(start=1_735_689_600, posted=(1,) * 48, finished=(0,) * 47 + (5,))
    svg = str(activity_chart(day, label='<script>alert("x")</script> & co'))
    assert "<script>" not in svg
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co" in svg
    root = ET.fromstring(svg)  # well-formed: the refresh parses it as SVG
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("role") == "img" and "48 posted, 5 finished, 0 failed" in root.get("aria-label")
    assert len(root.findall(".//{http://www.w3.org/2000/svg}polyline")) == 1  # finished only


def test_each_row_has_its_chart_in_the_page_and_in_the_refresh(resize):
    lifecycle("0" * 16, now_ms() - 10 * MIN, ("claimed", 1000), ("result", 2000))
    client = client_for("sam", is_staff=True)
    assert '<svg class="chart"' in client.get("/").content.decode()
    chart = rows(client)["task.example.com/resize"]["chart"]
    assert ET.fromstring(chart).find(".//{http://www.w3.org/2000/svg}polyline") is not None


def test_one_query_serves_every_queue_and_later_ones_read_only_the_last_90_minutes(make_queue):
    queues = [make_queue("task.example.com", f"q{i}") for i in range(5)]
    now = now_ms()
    for i, queue in enumerate(queues):
        lifecycle(f"{i:016x}", now - 10 * MIN, ("claimed", 10), ("result", 20), queue=queue.name)
        lifecycle(f"a{i:015x}", now - 5 * 60 * MIN, ("claimed", 10), ("result", 20),
                  queue=queue.name)  # fmt: skip
    client = client_for("sam", is_staff=True)

    def event_queries() -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/console/queues.json").status_code == 200
        return [q["sql"] for q in queries if "tasklogs_taskevent" in q["sql"]]

    # The settled half hours, the recent ones, the workers seen: all 5 queues in each.
    first = event_queries()
    assert len(first) == 3 and all("GROUP BY" in sql for sql in first)
    later = event_queries()  # the settled half hours come from the cache
    assert len(later) == 2
    for sql in later:
        since = int(sql.split('"t" >= ')[1].split(" ")[0].rstrip(")"))
        assert now // 1000 - since <= 90 * 60
    assert all(r["finished_day"] == 2 and r["ended_last_hour"] == 1 for r in rows(client).values())


def test_activity_keeps_queues_of_the_same_name_on_other_hosts_apart():
    now_s = 1_735_689_600
    store(
        event("posted", "0" * 16, now_s * 1000 - 60_000, host="a.example.com", queue="q"),
        event("posted", "1" * 16, now_s * 1000 - 60_000, host="b.example.com", queue="q"),
        event("posted", "2" * 16, now_s * 1000 - 60_000, host="b.example.com", queue="r"),
    )
    found = activity([("a.example.com", "q"), ("b.example.com", "r")], now_s=now_s)
    assert found[("a.example.com", "q")].totals()["posted_day"] == 1
    assert found[("b.example.com", "r")].totals()["posted_day"] == 1
    assert ("b.example.com", "q") not in found


def test_half_hours_follow_the_clock_and_the_last_hour_is_exact():
    now_s = 1_735_689_600 + 600  # ten minutes into a half hour
    at = lambda seconds_ago: (now_s - seconds_ago) * 1000  # noqa: E731
    store(
        event("result", "0" * 16, at(0)),  # now: the current half hour, the last slot
        event("result", "1" * 16, at(600)),  # its first second: still the last slot
        event("result", "2" * 16, at(601)),  # the half hour before
        event("failed", "3" * 16, at(3_599)),  # within the last hour
        event("failed", "4" * 16, at(3_600)),  # an hour ago exactly: out of the last hour
        event("result", "5" * 16, at(600 + 47 * 1_800)),  # the first slot's first second
        event("result", "6" * 16, at(601 + 47 * 1_800)),  # before the first slot: out
        event("result", "7" * 16, at(-5)),  # the future (a skewed clock): out
    )
    day = activity([("task.example.com", "resize")], now_s=now_s)[("task.example.com", "resize")]
    assert day.start == now_s - 600 - 47 * 1_800
    assert day.finished[-1] == 2 and day.finished[-2] == 1 and day.finished[0] == 1
    assert sum(day.finished) == 4 and sum(day.failed) == 2
    assert (day.finished_last_hour, day.failed_last_hour) == (3, 1)
    assert day.failure_rate == pytest.approx(0.25)


def test_settled_half_hours_are_counted_once_and_recent_ones_every_time():
    now_s = 1_735_689_600 + 600
    key = ("task.example.com", "resize")
    store(event("posted", "0" * 16, (now_s - 5 * 3_600) * 1000))
    assert sum(activity([key], now_s=now_s)[key].posted) == 1
    # Ingested late into a settled half hour, and just now into the current one:
    store(event("posted", "1" * 16, (now_s - 5 * 3_600) * 1000))
    store(event("posted", "2" * 16, now_s * 1000))
    assert sum(activity([key], now_s=now_s)[key].posted) == 2  # the late one waits for the cache
    cache.clear()  # as SETTLED_SECONDS later
    assert sum(activity([key], now_s=now_s)[key].posted) == 3


def test_a_quiet_day_is_said_in_the_chart_with_the_name_escaped():
    svg = str(activity_chart(Activity(start=1_735_689_600), label="<b>q</b>"))
    root = ET.fromstring(svg)
    assert "<b>" not in svg and root.get("aria-label") == "<b>q</b>: no events in the last 24 hours"
    assert root.find("{http://www.w3.org/2000/svg}text").text == "no events in 24 hours"


def test_a_queue_with_events_but_no_store_directory_is_not_called_never_posted(resize):
    lifecycle("0" * 16, now_ms() - 10 * MIN, ("claimed", 1000))
    row = rows(client_for("sam", is_staff=True))["task.example.com/resize"]
    assert row["never_posted"] is False


# --- workers at work and recent failures ----------------------------------------------------


def test_workers_are_those_that_claimed_or_reported_in_the_last_15_minutes(resize, other):
    now = now_ms()
    store(
        event("claimed", "1" * 16, now - 2 * MIN, worker="w1"),
        event("result", "1" * 16, now - 1 * MIN, worker="w1"),  # the same worker, once
        event("progress", "2" * 16, now - 14 * MIN, worker="w2"),
        event("claimed", "3" * 16, now - 20 * MIN, worker="w3"),  # too long ago
        event("posted", "4" * 16, now - 1 * MIN, worker="w5"),  # not a worker's event
        event("claimed", "5" * 16, now - 1 * MIN, worker="w4", host="other.example.com",
              queue="secret"),
    )  # fmt: skip
    client = client_for("sam", is_staff=True)
    found = rows(client)
    assert found["task.example.com/resize"]["workers"] == 2
    assert found["other.example.com/secret"]["workers"] == 1
    # the count leads to the queue's workers page
    page = client.get("/").content.decode()
    assert ('<a href="/console/task.example.com/resize/workers/" data-field="workers">2</a>'
            in page)  # fmt: skip


def test_recent_failures_are_the_newest_of_the_operated_queues_only(resize, other):
    now = now_ms()
    store(
        *(event("failed", f"{i:016x}", now - (i + 1) * MIN, worker=f"w{i}") for i in range(12)),
        event("timeout", "e" * 16, now - 30 * 1000),
        event("failed", "f" * 16, now - 10 * 1000, host="other.example.com", queue="secret"),
    )
    page = client_for("olga", role="operator", queue=resize).get("/").content.decode()
    section = page[page.index('id="failures-title"') :]
    shown = [section.index(f"<code>{i:016x}</code>") for i in range(9)]
    # Ten in all, newest first: the timeout, then failures 0..8; never the other queue's.
    assert section.index("<code>eeeeeeeeeeeeeeee</code>") < shown[0] and shown == sorted(shown)
    assert "timed out" in section and f"<code>{9:016x}</code>" not in section
    assert "ffffffffffffffff" not in page


def test_no_failures_says_so(resize):
    page = client_for("sam", is_staff=True).get("/").content.decode()
    assert "No task failed or timed out on these queues" in page


def test_the_refresh_gets_the_words_the_page_shows(resize):
    # dashboard.js puts these in the cells as they are, so the page reads the same after it
    now = now_ms()
    lifecycle("a" * 16, now - 20 * MIN, ("claimed", 1000), ("failed", 2000))
    for i in range(7):
        lifecycle(f"{i:016x}", now - 10 * MIN, ("claimed", 1000), ("result", 2000))
    client = client_for("sam", is_staff=True)
    row = rows(client)["task.example.com/resize"]
    assert row["words"] == {"oldest_pending_ms": "—", "failure_rate": "12%"}
    page = client.get("/").content.decode()
    assert 'data-field="failure_rate">12%<' in page
    assert 'data-field="oldest_pending_ms">—<' in page
