"""The insight page: where a queue's time goes, from the ingested events, and who may see it."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from queues.console import insight
from queues.console.insight import queue_insight, weighted_percentile

from .console_events import event, lifecycle, now_ms, store
from .test_console import client_for

pytestmark = pytest.mark.django_db
S, MIN, HOUR = 1_000, 60_000, 3_600_000
URL = "/console/task.example.com/resize/insight/"
NOW = 1_735_689_600_000  # 2025-01-01T00:00:00Z, for the service's own tests


def measures(queue, now=NOW):
    return {m.measure.name: m for m in queue_insight(queue, now_ms=now).measures}


# --- who sees it -------------------------------------------------------------------------


def test_staff_and_the_queues_operator_see_it(resize):
    assert client_for("sam", is_staff=True).get(URL).status_code == 200
    assert client_for("olga", role="operator", queue=resize).get(URL).status_code == 200


@pytest.mark.parametrize("role", [None, "producer", "worker"])
def test_anyone_else_gets_the_404_of_a_queue_that_does_not_exist(resize, other, role):
    client = client_for("pat", role=role, queue=resize)
    missing = client.get("/console/nowhere.example.com/none/insight/")
    assert client.get(URL).status_code == missing.status_code == 404
    assert client.get(URL).content == missing.content


def test_the_operator_of_another_queue_gets_404(resize, other):
    client = client_for("oscar", role="operator", queue=other)
    assert client.get(URL).status_code == 404
    assert client.get("/console/other.example.com/secret/insight/").status_code == 200


def test_anonymous_users_are_sent_to_log_in(resize):
    response = Client().get(URL)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_dashboard_row_links_to_it(resize):
    page = client_for("sam", is_staff=True).get("/").content.decode()
    assert f'href="{URL}"' in page


# --- durations ---------------------------------------------------------------------------


def test_wait_run_and_read_times_over_the_last_hour(resize):
    waits = [1 * S, 2 * S, 3 * S, 4 * S, 60 * S]
    for i, wait in enumerate(waits):
        run = (i + 1) * 10 * S
        lifecycle(f"{i:016x}", NOW - 30 * MIN, ("claimed", wait), ("result", wait + run),
                  ("fetched", wait + run + 500))  # fmt: skip
    found = measures(resize)
    assert (found["wait"].hour.p50_ms, found["wait"].hour.p95_ms) == (3 * S, 60 * S)
    assert (found["run"].hour.p50_ms, found["run"].hour.p95_ms) == (30 * S, 50 * S)
    assert (found["read"].hour.p50_ms, found["read"].hour.p95_ms) == (500, 500)
    assert found["wait"].hour.ends == found["wait"].hour.measured == 5
    assert found["wait"].day.p50_ms == 3 * S


def test_the_day_holds_what_the_hour_does_not(resize):
    lifecycle("0" * 16, NOW - 30 * MIN, ("claimed", 1 * S))
    lifecycle("1" * 16, NOW - 5 * HOUR, ("claimed", 100 * S))
    lifecycle("2" * 16, NOW - 25 * HOUR, ("claimed", 500 * S))  # older than a day: out
    wait = measures(resize)["wait"]
    assert (wait.hour.ends, wait.hour.p95_ms) == (1, 1 * S)
    assert (wait.day.ends, wait.day.p50_ms, wait.day.p95_ms) == (2, 1 * S, 100 * S)


def test_a_wait_starts_again_when_a_lapsed_lease_puts_the_task_back(resize):
    lifecycle("0" * 16, NOW - 30 * MIN, ("claimed", 1 * S), ("requeue", 61 * S),
              ("claimed", 63 * S))  # fmt: skip
    wait = measures(resize)["wait"]
    assert wait.hour.measured == 2 and wait.hour.p95_ms == 2 * S


def test_a_wait_starts_again_when_an_operator_requeues_the_task(resize):
    lifecycle("0" * 16, NOW - 30 * MIN, ("claimed", 1 * S), ("requeued", 61 * S),
              ("claimed", 64 * S))  # fmt: skip
    wait = measures(resize)["wait"]
    assert wait.hour.measured == 2 and wait.hour.p95_ms == 3 * S


def test_a_failed_run_is_a_run_and_its_read_is_a_read(resize):
    lifecycle("0" * 16, NOW - 30 * MIN, ("claimed", 1 * S), ("failed", 8 * S), ("fetched", 9 * S))
    found = measures(resize)
    assert found["run"].hour.p50_ms == 7 * S and found["read"].hour.p50_ms == 1 * S


def test_an_end_whose_start_was_never_ingested_is_counted_not_measured(resize):
    store(event("claimed", "0" * 16, NOW - 10 * MIN))
    wait = measures(resize)["wait"]
    assert (wait.hour.ends, wait.hour.measured, wait.hour.p50_ms) == (1, 0, None)


def test_another_queues_events_do_not_count(resize):
    lifecycle("0" * 16, NOW - 30 * MIN, ("claimed", 9 * S), queue="other")
    lifecycle("1" * 16, NOW - 30 * MIN, ("claimed", 9 * S), host="b.example.com")
    assert measures(resize)["wait"].day.ends == 0


def test_a_busy_day_is_sampled_per_stratum_and_weighted(resize, monkeypatch):
    monkeypatch.setattr(insight, "PER_STRATUM", 2)
    monkeypatch.setattr(insight, "HOUR_SAMPLE", 3)
    # The last hour: 10 quick claims. Five hours back: 2 slow ones, in another stratum.
    for i in range(10):
        lifecycle(f"a{i:015x}", NOW - 20 * MIN - i * S, ("claimed", 1 * S))
    for i in range(2):
        lifecycle(f"b{i:015x}", NOW - 5 * HOUR - i * S, ("claimed", 100 * S))
    wait = measures(resize)["wait"]
    assert (wait.hour.ends, wait.hour.measured) == (10, 3)
    assert (wait.day.ends, wait.day.measured) == (12, 4)
    # Weighted, the 10 quick claims outweigh the 2 slow ones (unweighted, 2 of 4 samples
    # would be slow and the median would be 100 s).
    assert wait.day.p50_ms == 1 * S and wait.day.p95_ms == 100 * S
    assert wait.hour.sampled and wait.day.sampled  # 10 ends in an hour that samples 3
    assert not measures(resize)["run"].hour.sampled  # no run ended: nothing was left out


def test_the_page_says_which_figures_are_sampled(resize, monkeypatch):
    monkeypatch.setattr(insight, "HOUR_SAMPLE", 3)
    now = now_ms()
    for i in range(10):  # the hour's ten claims are sampled; the day's stratum takes all ten
        lifecycle(f"a{i:015x}", now - 20 * MIN - i * S, ("claimed", 1 * S))
    page = client_for("sam", is_staff=True).get(URL).content.decode()
    row = page[page.index('data-measure="wait"') :]
    row = row[: row.index("</tr>")]
    assert row.count("≈ ") == 2 and row.count(">sampled</span>") == 1
    assert "3 of 10 <span" in row and "10 of 10</td>" in row


def test_queries_do_not_grow_with_the_events(resize):
    def count() -> int:
        cache.clear()  # the day chart's settled counts, kept from the call before
        with CaptureQueriesContext(connection) as queries:
            queue_insight(resize, now_ms=NOW)
        return len(queries)

    lifecycle("0" * 16, NOW - 30 * MIN, ("claimed", 1 * S), ("result", 2 * S))
    few = count()
    for i in range(1, 60):
        lifecycle(f"{i:016x}", NOW - 30 * MIN, ("claimed", 1 * S), ("result", 2 * S))
    assert count() == few


@pytest.mark.parametrize(
    ("pairs", "q", "expected"),
    [
        ([], 0.5, None),
        ([(5, 1.0)], 0.95, 5),
        ([(1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0)], 0.5, 2),
        ([(1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0)], 0.95, 4),
        ([(1, 9.0), (100, 1.0)], 0.5, 1),
        ([(1, 9.0), (100, 1.0)], 0.95, 100),
        ([(1, 1.0), (100, 9.0)], 0.5, 100),
    ],
)
def test_weighted_percentile(pairs, q, expected):
    assert weighted_percentile(pairs, q) == expected


# --- results nobody read -----------------------------------------------------------------


def test_results_nobody_read_are_listed_newest_first_with_their_timeline(resize):
    lifecycle("0" * 16, NOW - 3 * HOUR, ("result", 1 * S))  # never read, still kept
    lifecycle("1" * 16, NOW - 2 * HOUR, ("result", 1 * S), ("fetched", 5 * S))  # read
    lifecycle("2" * 16, NOW - 1 * HOUR, ("result", 1 * S), ("cleaned", 30 * MIN))  # gone unread
    lifecycle("3" * 16, NOW - 20 * S, ("result", 1 * S))  # too fresh to call unread
    report = queue_insight(resize, now_ms=NOW)
    assert [(u.task_id, u.cleaned) for u in report.unread] == [("2" * 16, True), ("0" * 16, False)]
    assert not report.unread_more and report.results_day == 4


def test_the_page_lists_unread_results_linking_to_task_logs(resize):
    lifecycle("0" * 16, now_ms() - HOUR, ("claimed", 1 * S), ("result", 2 * S))
    page = client_for("sam", is_staff=True).get(URL).content.decode()
    assert f'href="/logs/task.example.com/resize/{"0" * 16}/"' in page
    assert "kept, not read yet" in page
    assert '<tr data-measure="run">' in page and "1.0 s" in page


def test_more_unread_results_than_shown_say_so(resize, monkeypatch):
    monkeypatch.setattr(insight, "UNREAD_SHOWN", 2)
    for i in range(3):
        lifecycle(f"{i:016x}", NOW - HOUR - i * MIN, ("result", 1 * S))
    report = queue_insight(resize, now_ms=NOW)
    assert [u.task_id for u in report.unread] == [f"{0:016x}", f"{1:016x}"] and report.unread_more


# --- empty states ------------------------------------------------------------------------


def test_a_queue_without_events_says_so_plainly(resize):
    page = client_for("sam", is_staff=True).get(URL).content.decode()
    assert "No task was posted, finished, failed or cancelled here in the last 24 hours." in page
    assert "No task finished here in the last 24 hours." in page
    assert "None" not in page.split("<main")[1]
    row = page.split('<tr data-measure="wait">')[1].split("</tr>")[0]
    assert row.count("—") == 4 and "0 of 0" in row


def test_every_result_read_says_so(resize):
    lifecycle("0" * 16, now_ms() - HOUR, ("result", 1 * S), ("fetched", 2 * S))
    page = client_for("sam", is_staff=True).get(URL).content.decode()
    assert "Every result of the last 24 hours has been read." in page
