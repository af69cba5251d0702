"""The workers page: each worker of a queue (or of every queue operated), what it holds now
(task, since, lease left), its last claim or report, the tasks it finished and failed in the
last hour, and the workers gone quiet; on both stores."""

from __future__ import annotations

import datetime as dt
import io
import re
import time

import pytest
from django.core.management import call_command
from django.db.models import F

from queues import stores

from .test_console import client_for

pytestmark = pytest.mark.django_db
HOST, NAME = "task.example.com", "resize"
MIN = 60_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def worked(make_queue, store_kind, store_dirs):
    """box-1 finished a task and holds one; box-2 failed an attempt (retried) and holds nothing;
    gone-3 claimed ten minutes ago with a 60 s lease and was never heard of again."""
    queue = make_queue(HOST, NAME, lease_seconds=60, max_attempts=3, backoff_seconds=0,
                       store=store_kind)  # fmt: skip
    store, settings = stores.of(HOST, NAME), queue.to_settings()
    start = now_ms()
    posted = [store.post(HOST, NAME, {"n": n}, settings=settings, posted_by="a",
                         now=start - 11 * MIN).task.id for n in range(4)]  # fmt: skip
    [lost] = store.claim(HOST, NAME, settings=settings, worker="gone-3", now=start - 10 * MIN)
    done, held = store.claim(HOST, NAME, settings=settings, worker="box-1", max_tasks=2)
    store.finish(HOST, NAME, done.id, settings=settings, worker="box-1", attempt=1, result={})
    [failed] = store.claim(HOST, NAME, settings=settings, worker="box-2")
    store.fail(HOST, NAME, failed.id, settings=settings, worker="box-2", attempt=1,
               result={"error": "no"}, retry=True)  # fmt: skip
    call_command("ingest_tasklogs", "--source", str(store_dirs["logs"] / "tasks"),
                 stdout=io.StringIO())  # fmt: skip
    assert lost.id == posted[0]
    return queue, {"lost": lost.id, "held": held.id, "done": done.id, "failed": failed.id}


def rows(page: str) -> dict[str, dict[str, str]]:
    """Each worker's row: its state ("is") and its cells' text by label."""
    found = {}
    for match in re.finditer(r'<tr data-worker="([^"]+)"[^>]*data-state="(\w+)".*?</tr>', page,
                             re.S):  # fmt: skip
        cells = dict(re.findall(r'data-label="([^"]+)"[^>]*>(.*?)</td>', match.group(0), re.S))
        text = {label: " ".join(re.sub(r"<[^>]+>", " ", html).split())
                for label, html in cells.items()}  # fmt: skip
        found[match.group(1)] = {"is": match.group(2), **text}
    return found


def test_a_queues_workers_what_they_hold_and_who_went_quiet(worked):
    queue, ids = worked
    client = client_for("olga", role="operator", queue=queue)
    page = client.get(f"/console/{HOST}/{NAME}/workers/").content.decode()
    shown = rows(page)
    assert set(shown) == {"box-1", "box-2", "gone-3"}
    box1, box2, gone = shown["box-1"], shown["box-2"], shown["gone-3"]
    assert box1["is"] == "working" and ids["held"] in box1["holds now"]
    assert re.fullmatch(rf"{ids['held']} since (just now|\d s ago) · lease (5\d|60) s left",
                        box1["holds now"]), box1  # fmt: skip
    assert (box1["finished, last hour"], box1["failed, last hour"]) == ("1", "0")
    assert re.fullmatch(r"just now|\d s ago", box1["last claim or report"])
    assert box2["is"] == "idle" and box2["holds now"] == "nothing"
    assert (box2["finished, last hour"], box2["failed, last hour"]) == ("0", "1")
    # its lease ran out 9 minutes ago: no heartbeat since
    assert gone["is"] == "quiet" and ids["lost"] in gone["holds now"]
    assert "lease ran out 9 min" in gone["holds now"]
    assert f"its lease on {ids['lost']} ran out: no heartbeat" in gone["state"]
    assert gone["last claim or report"].startswith("10 min")
    assert '3 workers, <strong class="status-failed">1 gone quiet</strong>' in page
    assert 'data-live-every="5"' in page and "console/live.js" in page


def test_every_queues_workers_name_their_queue_and_only_the_queues_operated(worked, make_queue):
    other = make_queue("other.example.com", "secret")
    staff = client_for("sam", is_staff=True).get("/console/workers/").content.decode()
    assert set(rows(staff)) == {"box-1", "box-2", "gone-3"}
    assert f'href="/console/{HOST}/{NAME}/workers/"' in staff
    outsider = client_for("oscar", role="operator", queue=other)
    assert rows(outsider.get("/console/workers/").content.decode()) == {}
    assert outsider.get(f"/console/{HOST}/{NAME}/workers/").status_code == 404


def test_a_worker_silent_for_five_minutes_and_holding_nothing_has_gone_quiet(worked):
    """box-2 was last seen just now; five minutes on, holding nothing, it is quiet."""
    from queues.console.workers import workers_of

    queue, _ = worked
    later = workers_of([queue], now_ms=now_ms() + 6 * MIN)
    state = {row.name: (row.state, row.why) for row in later.rows}
    assert state["box-2"] == ("quiet", "holds nothing, no claim or report for 5 min")
    # box-1's 60 s lease is what tells of it: not extended by a heartbeat, it ran out
    assert state["box-1"][0] == "quiet" and state["box-1"][1].endswith("ran out: no heartbeat")


def api_claim(queue, worker: str) -> int:
    """A worker's claim through the API, as `taskhoster work` makes it: its status code."""
    from queues.auth.tokens import issue_token
    from queues.services import get_or_create_user, grant
    from tests.api.conftest import bearer, url

    grant("wendy", f"{HOST}/{NAME}", "worker")
    client = bearer(issue_token(get_or_create_user("wendy"), "t")[1])
    return client.post(url(HOST, NAME, "claim"), {"worker": worker}, format="json").status_code


def test_a_worker_claiming_on_an_empty_queue_is_idle_not_gone(make_queue, store_kind):
    """A claim that finds nothing writes no event: the API's note of it keeps the worker shown,
    idle, for as long as it claims (it was missing, then shown gone quiet after 5 minutes)."""
    from queues.api import sightings
    from queues.models import WorkerSighting

    queue = make_queue(HOST, NAME, store=store_kind)
    sightings.forget()
    assert api_claim(queue, "idle-4") == 204
    client = client_for("olga", role="operator", queue=queue)
    shown = rows(client.get(f"/console/{HOST}/{NAME}/workers/").content.decode())
    assert shown["idle-4"]["is"] == "idle" and shown["idle-4"]["holds now"] == "nothing"
    assert re.fullmatch(r"just now|\d s ago", shown["idle-4"]["last claim or report"])
    # six minutes without a claim: gone quiet; its next claim makes it idle again
    WorkerSighting.objects.update(seen_at=F("seen_at") - dt.timedelta(minutes=6))
    shown = rows(client.get(f"/console/{HOST}/{NAME}/workers/").content.decode())
    assert shown["idle-4"]["is"] == "quiet"
    sightings.forget()
    assert api_claim(queue, "idle-4") == 204
    shown = rows(client.get(f"/console/{HOST}/{NAME}/workers/").content.decode())
    assert shown["idle-4"]["is"] == "idle"


def test_a_workers_claims_are_noted_once_a_minute(make_queue):
    from queues.api import sightings
    from queues.models import WorkerSighting

    make_queue(HOST, NAME)
    sightings.forget()
    assert sightings.saw(HOST, NAME, "box-9", at=1000.0)
    first = WorkerSighting.objects.get(worker="box-9").seen_at
    assert not sightings.saw(HOST, NAME, "box-9", at=1059.0)  # within the minute: no write
    assert WorkerSighting.objects.get(worker="box-9").seen_at == first
    assert sightings.saw(HOST, NAME, "box-9", at=1061.0)
    assert WorkerSighting.objects.count() == 1


def test_a_database_that_refuses_the_note_leaves_the_claim_alone(make_queue):
    """The sighting is for the page: a refused write is logged, the claim answers, and the next
    claim tries the write again."""
    from django.db import connection

    from queues.api import sightings
    from queues.models import WorkerSighting

    queue = make_queue(HOST, NAME)
    sightings.forget()
    table = WorkerSighting._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:
        assert api_claim(queue, "box-8") == 204
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    assert not WorkerSighting.objects.exists()
    assert api_claim(queue, "box-8") == 204  # not remembered as written: written now
    assert WorkerSighting.objects.filter(worker="box-8").exists()
