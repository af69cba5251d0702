"""/metrics through a real gunicorn: refused without the token, and each family moving as a
lifecycle runs and its events are ingested, parsed with prometheus_client's own parser."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .live import HOST, METRICS_TOKEN

pytestmark = pytest.mark.slow
QUEUE = "metrics"


def scrape(live, token: str | None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{live.url}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def figures(live) -> dict[tuple[str, str], float]:
    """{(sample name, the sample's event or state label): value} of this test's queue."""
    status, body = scrape(live, METRICS_TOKEN)
    assert status == 200
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.labels.get("host") == HOST and s.labels.get("queue") == QUEUE:
                found[(s.name, s.labels.get("event") or s.labels.get("state", ""))] = s.value
    return found


def test_refused_without_the_token_and_to_api_tokens(live):
    assert scrape(live, None)[0] == 401
    for who in ("paul", "wendy", "olga"):  # producer, worker, operator
        assert scrape(live, live.tokens[who])[0] == 403


def test_families_move_as_a_lifecycle_runs(live, clients):
    before = figures(live)
    for n in range(3):
        clients["paul"].post(HOST, QUEUE, {"n": n})
    first = clients["wendy"].claim(HOST, QUEUE, "box-1")
    second = clients["wendy"].claim(HOST, QUEUE, "box-2")
    clients["wendy"].result(HOST, QUEUE, first["id"], "box-1", first["attempts"], {"ok": 1})
    clients["wendy"].fail(HOST, QUEUE, second["id"], "box-2", second["attempts"], {"e": 1})
    live.manage("ingest_tasklogs")
    after = figures(live)
    assert after[("taskhoster_tasks", "pending")] == 1
    assert after[("taskhoster_tasks", "done")] - before.get(("taskhoster_tasks", "done"), 0) == 2
    for event, moved in (("posted", 3), ("claimed", 2), ("result", 1), ("failed", 1)):
        key = ("taskhoster_events_total", event)
        assert after[key] - before.get(key, 0) == moved, event
    assert after[("taskhoster_workers_seen", "")] == 2
    assert after[("taskhoster_wait_seconds_gcount", "")] >= 2
