"""GET /metrics: who may read it, and each family's value after a known history, parsed with
prometheus_client's own parser (files store and PostgreSQL store)."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from queues import stores
from queues.auth.tokens import issue_token
from queues.metrics import sources
from queues.metrics.access import token_matches
from queues.metrics.figures import bucketed
from queues.models import QueueAccess
from tasklogs.ingest import ingest_directory
from tasklogs.models import TaskEvent

from .console_events import event, lifecycle, store
from .test_console import client_for

pytestmark = pytest.mark.django_db
TOKEN = "metrics-secret-0123456789"
HOST = "task.example.com"


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.TASKHOSTER_METRICS_TOKEN = TOKEN


def scrape(client: Client | None = None, **headers: str):
    client = client or Client()
    return client.get("/metrics", headers=headers or {"Authorization": f"Bearer {TOKEN}"})


def families(response) -> dict:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def values(found: dict, family: str, **match: str) -> dict:
    """{the sample's labels other than those matched, as a tuple: value} of one family."""
    out = {}
    for sample in found[family].samples:
        if all(sample.labels.get(k) == v for k, v in match.items()):
            rest = tuple(v for k, v in sorted(sample.labels.items()) if k not in match)
            out[(sample.name, *rest)] = sample.value
    return out


# --- who may read it ----------------------------------------------------------------------


def test_anonymous_gets_401_in_the_apis_error_shape():
    response = Client().get("/metrics")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert set(response.json()) == {"code", "detail"}
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Basic dXNlcjpwdw==", "Bearer", "Token " + TOKEN, TOKEN])
def test_another_scheme_or_no_token_is_401(header):
    response = scrape(Authorization=header)
    assert response.status_code == 401 and response.json()["code"] == "not_authenticated"


def test_a_wrong_token_is_403():
    response = scrape(Authorization="Bearer " + TOKEN + "x")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


@pytest.mark.parametrize("role", ["producer", "worker", "operator"])
def test_an_api_token_of_a_queues_user_is_403(resize, role):
    user = User.objects.create_user("wes")
    QueueAccess.objects.create(queue=resize, user=user, role=role)
    _, api_token = issue_token(user, "cli")
    assert scrape(Authorization=f"Bearer {api_token}").status_code == 403


def test_no_configured_token_opens_nothing(settings):
    settings.TASKHOSTER_METRICS_TOKEN = ""
    assert scrape(Authorization="Bearer ").status_code == 401
    assert scrape(Authorization="Bearer anything").status_code == 403
    assert not token_matches("", "")


def test_staff_sessions_read_it_and_other_sessions_get_403(resize):
    assert client_for("sam", is_staff=True).get("/metrics").status_code == 200
    refused = client_for("olga", role="operator", queue=resize).get("/metrics")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"


def test_the_right_token_reads_it_and_only_get_is_served():
    assert scrape().status_code == 200
    response = Client().post("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 405


# --- the figures after a known history ----------------------------------------------------


def history(queue) -> None:
    """Post 3, claim 2, finish 1, fail 1 (for good), and a fourth posted with a delay."""
    key = (queue.host.name, queue.name)
    store, settings = stores.of(*key), queue.to_settings()
    for n in range(3):
        store.post(*key, {"n": n}, settings=settings, posted_by=None)
    store.post(*key, {"n": 9}, settings=settings, posted_by=None, delay_seconds=3_600)
    first, second = (store.claim(*key, settings=settings, worker=w)[0] for w in ("w1", "w2"))
    store.finish(*key, first.id, settings=settings, worker="w1", attempt=first.attempts,
                  result={"ok": True})  # fmt: skip
    store.fail(*key, second.id, settings=settings, worker="w2", attempt=second.attempts,
                result={"error": "boom"})  # fmt: skip


@pytest.mark.parametrize("store_kind", ["files", "postgres"], indirect=True)
def test_each_family_after_post_claim_finish_fail(make_queue, store_dirs, store_kind, pg_ok):
    queue = make_queue(HOST, "resize", store=store_kind)
    history(queue)
    if store_kind == "files":
        ingest_directory(store_dirs["logs"] / "tasks")
    found = families(scrape())
    labels = {"host": HOST, "queue": "resize"}
    tasks = values(found, "taskhoster_tasks", **labels)
    assert tasks == {("taskhoster_tasks", "pending"): 2, ("taskhoster_tasks", "delayed"): 1,
                     ("taskhoster_tasks", "retrying"): 0, ("taskhoster_tasks", "processing"): 0,
                     ("taskhoster_tasks", "done"): 2}  # fmt: skip
    oldest = values(found, "taskhoster_oldest_pending_age_seconds", **labels)
    assert 0 <= oldest[("taskhoster_oldest_pending_age_seconds",)] < 60
    if store_kind == "postgres" and not pg_ok:
        return  # its events are in another database's table: not Task Logs' rows
    events = values(found, "taskhoster_events", **labels)
    assert events[("taskhoster_events_total", "posted")] == 4
    assert events[("taskhoster_events_total", "claimed")] == 2
    assert events[("taskhoster_events_total", "result")] == 1
    assert events[("taskhoster_events_total", "failed")] == 1
    assert values(found, "taskhoster_workers_seen", **labels) == {("taskhoster_workers_seen",): 2}
    wait = values(found, "taskhoster_wait_seconds", **labels)
    assert wait[("taskhoster_wait_seconds_bucket", "+Inf")] == 2
    # The 0.0.4 format has no gauge histogram: its count and sum are gauges of their own.
    gcount = values(found, "taskhoster_wait_seconds_gcount", **labels)
    assert gcount == {("taskhoster_wait_seconds_gcount",): 2}
    assert wait[("taskhoster_wait_seconds_bucket", "60.0")] == 2  # claimed within the test
    run = values(found, "taskhoster_run_seconds", **labels)
    assert run[("taskhoster_run_seconds_bucket", "+Inf")] == 2
    run_sum = values(found, "taskhoster_run_seconds_gsum", **labels)
    assert 0 <= run_sum[("taskhoster_run_seconds_gsum",)] < 60
    assert values(found, "taskhoster_store_up", **labels) == {("taskhoster_store_up",): 1}
    timeout = values(found, "taskhoster_queue_timeout_seconds", **labels)
    assert timeout == {("taskhoster_queue_timeout_seconds",): queue.queue_seconds}


@pytest.fixture
def pg_ok(request, store_kind):
    """For the postgres run: whether the store's events are Task Logs' own rows."""
    if store_kind != "postgres":
        return True
    return request.getfixturevalue("pg_store").shares_console_db


def test_events_keep_counting_past_the_settled_total_and_survive_a_cleared_cache(resize):
    now = int(time.time() * 1000)
    lifecycle("0" * 16, now - 5_000, ("claimed", 1_000), ("result", 2_000))
    assert sources.event_totals(now_s=now / 1000).events[(HOST, "resize", "result")] == 1
    # A minute later the rows settle; a late-ingested old line is still counted after that.
    later = now / 1000 + sources.SETTLE_SECONDS + 1
    assert sources.event_totals(now_s=later).events[(HOST, "resize", "posted")] == 1
    store(event("posted", "1" * 16, now - 86_400_000))
    assert sources.event_totals(now_s=later + 1).events[(HOST, "resize", "posted")] == 2
    from django.core.cache import cache

    cache.clear()  # a restarted process: counted again from Task Logs, the same totals
    assert sources.event_totals(now_s=later + 2).events[(HOST, "resize", "posted")] == 2


def test_lease_lapses_count_the_sweeps_lapsed_events(resize, store_dirs):
    store, settings, key = stores.of(HOST, "resize"), resize.to_settings(), (HOST, "resize")
    store.post(*key, {"n": 1}, settings=settings, posted_by=None)
    claimed = store.claim(*key, settings=settings, worker="w1")[0]
    assert claimed.lease is not None
    store.sweep_queue(*key, settings, now=claimed.lease.until + 1)
    ingest_directory(store_dirs["logs"] / "tasks")
    found = families(scrape())
    assert values(found, "taskhoster_lease_lapses", host=HOST, queue="resize") == {
        ("taskhoster_lease_lapses_total",): 1
    }


def test_histogram_buckets_are_cumulative_and_scaled_to_every_end_counted():
    buckets, total = bucketed(sources.WindowDurations(ends=4, seconds=[0.2, 3.0]))
    as_dict = dict(buckets)
    assert as_dict["0.25"] == 2 and as_dict["2.5"] == 2 and as_dict["5.0"] == 4
    assert as_dict["+Inf"] == 4 and total == pytest.approx(6.4)
    assert dict(bucketed(sources.WindowDurations(ends=3, seconds=[]))[0])["+Inf"] == 0


def test_odd_queue_names_are_escaped_and_the_whole_output_parses(make_queue, store_dirs):
    odd = 'a"b\\c'
    from queues.models import Host, Queue

    host = Host.objects.get_or_create(name=HOST)[0]
    Queue.objects.bulk_create([Queue(host=host, name=odd)])  # the model's own names are tamer
    store(event("posted", "2" * 16, int(time.time() * 1000), queue=odd),
          event("posted", "3" * 16, int(time.time() * 1000), queue="line\nbreak"))  # fmt: skip
    response = scrape()
    assert 'queue="a\\"b\\\\c"' in response.content.decode()
    found = families(response)
    events = values(found, "taskhoster_events", event="posted")
    assert events[("taskhoster_events_total", HOST, odd)] == 1
    assert events[("taskhoster_events_total", HOST, "line\nbreak")] == 1
    for name in ("taskhoster_tasks", "taskhoster_ingest_lag_bytes", "taskhoster_wait_seconds"):
        assert name in found


def test_the_ingester_lag_is_the_bytes_and_age_not_ingested(resize, store_dirs):
    store, settings = stores.of(HOST, "resize"), resize.to_settings()
    store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by=None)
    lagging = families(scrape())
    assert lagging["taskhoster_ingest_lag_bytes"].samples[0].value > 0
    ingest_directory(store_dirs["logs"] / "tasks")
    caught_up = families(scrape())
    assert caught_up["taskhoster_ingest_lag_bytes"].samples[0].value == 0
    assert caught_up["taskhoster_ingest_lag_seconds"].samples[0].value == 0


def test_a_queue_whose_store_cannot_answer_is_down_and_the_rest_still_scraped(make_queue):
    from queues.models import Host, Queue
    from queues.stores.pg_location import pg_location

    if pg_location() is not None:
        pytest.skip("this site has a PostgreSQL store: a postgres queue's store answers")
    make_queue(HOST, "resize")
    host = Host.objects.get(name=HOST)
    Queue.objects.bulk_create([Queue(host=host, name="elsewhere", store="postgres")])
    found = families(scrape())
    up = values(found, "taskhoster_store_up", host=HOST)
    assert up[("taskhoster_store_up", "resize")] == 1  # never posted to: an empty queue
    assert up[("taskhoster_store_up", "elsewhere")] == 0
    tasks = values(found, "taskhoster_tasks", host=HOST)
    assert tasks[("taskhoster_tasks", "resize", "pending")] == 0
    assert ("taskhoster_tasks", "elsewhere", "pending") not in tasks


def test_a_first_scrape_settles_all_but_the_newest_ids_and_later_rows_still_count(
    resize, monkeypatch
):
    from django.core.cache import cache

    monkeypatch.setattr(sources, "COLD_MARGIN", 1)
    now = int(time.time() * 1000)
    store(*(event("posted", f"{n:016x}", now) for n in range(3)))
    first = sources.event_totals(now_s=now / 1000)
    assert first.events[(HOST, "resize", "posted")] == 3
    top = max(TaskEvent.objects.values_list("id", flat=True))
    assert cache.get(sources.SETTLED_KEY).upto_id == top - 1
    store(event("posted", "f" * 16, now))
    assert sources.event_totals(now_s=now / 1000 + 1).events[(HOST, "resize", "posted")] == 4


# --- what deploy/ ships beside it -----------------------------------------------------------


def _exposed_names(found: dict) -> set[str]:
    return {s.name for f in found.values() for s in f.samples} | set(found)


def _metric_names(expr: str) -> set[str]:
    import re

    return set(re.findall(r"\btaskhoster_[a-z_]+", expr))


def test_the_alert_rules_and_the_dashboard_use_only_metrics_the_scrape_has(resize, store_dirs):
    import json
    from pathlib import Path

    import yaml

    from queues.metrics import server

    history(resize)
    ingest_directory(store_dirs["logs"] / "tasks")
    # the figures a sweep loop and a flushing store of this process would have counted
    server.observe_sweep(0.01, skipped=False, errors=False)
    server.observe_flush(0.001)
    server.observe_request("metrics", "GET", 200, 0.01)
    found = families(scrape())
    exposed = _exposed_names(found) | {"taskhoster_lease_lapses_total"}
    deploy = Path(__file__).resolve().parent.parent / "deploy"
    rules = yaml.safe_load((deploy / "prometheus" / "taskhoster-alerts.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    dashboard = json.loads((deploy / "grafana" / "taskhoster-queues.json").read_text())
    exprs += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = set().union(*map(_metric_names, exprs))
    assert len(used) >= 10
    assert used <= exposed, used - exposed


def test_the_oldest_pending_age_is_the_oldest_pending_tasks(resize):
    store, settings, key = stores.of(HOST, "resize"), resize.to_settings(), (HOST, "resize")
    now = int(time.time() * 1000)
    store.post(*key, {"n": 1}, settings=settings, posted_by=None, now=now - 120_000)
    store.post(*key, {"n": 2}, settings=settings, posted_by=None, now=now - 30_000)
    found = values(families(scrape()), "taskhoster_oldest_pending_age_seconds", host=HOST)
    assert 120 <= found[("taskhoster_oldest_pending_age_seconds", "resize")] < 180


def test_the_raw_counts_name_the_task_logs_table():
    from queues.metrics import sources
    from tasklogs.models import TaskEvent

    assert TaskEvent._meta.db_table == sources.EVENTS_TABLE
    for query in (sources._COUNT_AFTER_ID, sources._COUNT_BETWEEN_IDS):
        assert f'FROM "{sources.EVENTS_TABLE}" NOT INDEXED' in query


# --- the server's own figures, in this process's memory (no multiprocess directory) ---------


def own(found: dict, family: str, **match: str) -> float:
    return sum(values(found, family, **match).values()) if family in found else 0


def test_requests_are_counted_by_route_name_and_status_class(resize):
    before = families(scrape())
    client = Client()
    assert client.get("/api/v1/queues/task.example.com/resize/tasks/0123456789abcdef").status_code
    after = families(scrape())
    count = "taskhoster_request_duration_seconds"
    task = {"route": "queues:api:task", "method": "GET", "status": "4xx"}
    n = ("taskhoster_request_duration_seconds_count",)
    earlier = values(before, count, **task).get(n, 0) if count in before else 0
    assert values(after, count, **task)[n] - earlier == 1
    assert not any("0123456789abcdef" in v for s in after[count].samples for v in s.labels.values())
    # the scrape itself is a route of its own
    assert own(after, count, route="metrics", method="GET", status="2xx") >= 1


def test_the_server_figures_can_be_turned_off(settings):
    settings.TASKHOSTER_SERVER_METRICS = False
    found = families(scrape())
    assert "taskhoster_request_duration_seconds" not in found
    assert "taskhoster_tasks" in found


def test_a_flush_is_timed_once_however_often_the_middleware_is_made():
    from queues.metrics import server
    from queues.store import flushing

    Client().get("/metrics")
    Client().get("/metrics")
    assert flushing.FLUSH_OBSERVERS.count(server.observe_flush) == 1
    before = own(families(scrape()), "taskhoster_flush_seconds", program="web")
    flushing.GroupFlush(lambda: None).wait()
    after = own(families(scrape()), "taskhoster_flush_seconds", program="web")
    assert after > before
