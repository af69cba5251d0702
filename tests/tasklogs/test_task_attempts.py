"""A task's attempts on its console page: how long each waited to be claimed and ran, and why
a failed one failed, from the events Task Logs ingested."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from queues import stores

from .conftest import DAY1

pytestmark = pytest.mark.django_db
HOST = "task.example.com"


def attempt_rows(html: str) -> list[list[str]]:
    table = html[html.index('<table class="attempts cards">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table[table.index("<tbody>") :], re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in rows]
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in row] for row in cells]


def test_each_attempt_shows_its_wait_its_run_and_why_it_failed(client, make_queue, day_dir):
    queue = make_queue(HOST, "resize", max_attempts=3, backoff_seconds=5, archive_payloads=True)
    settings, store = queue.to_settings(), stores.of(HOST, "resize")
    t0 = DAY1 * 1000
    task = store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by=None, now=t0).task
    work = {"settings": settings, "worker": "box-1"}
    store.claim(HOST, "resize", now=t0 + 1_500, **work)
    store.fail(HOST, "resize", task.id, attempt=1, retry=True, now=t0 + 4_000,
               result={"error": "OSError: disk full\nmore"}, **work)  # fmt: skip
    store.claim(HOST, "resize", now=t0 + 10_000, **work)  # the 5 s backoff, and a second more
    store.finish(HOST, "resize", task.id, attempt=2, result={}, now=t0 + 10_250, **work)
    call_command("ingest_tasklogs", "--source", str(day_dir), stdout=io.StringIO())
    client.force_login(get_user_model().objects.create_user("root", is_staff=True))

    html = client.get(reverse("queues:task", args=[HOST, "resize", task.id])).content.decode()
    rows = attempt_rows(html)
    # number, worker, waited, claimed, ran, ended, how
    assert [(r[0], r[2], r[4], r[6]) for r in rows] == [
        ("1", "1.5 s", "2.5 s", "requeue: OSError: disk full"),
        ("2", "6.0 s", "250 ms", "result"),
    ]


def test_a_claim_given_back_unheard_is_no_attempt_and_its_wait_goes_on(client, make_queue, day_dir):
    """A claim whose client had left was given back (`unclaimed`): the page shows one
    attempt, the one that ran, waiting from the post."""
    queue = make_queue(HOST, "resize")
    settings, store = queue.to_settings(), stores.of(HOST, "resize")
    t0 = DAY1 * 1000
    task = store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by=None, now=t0).task
    store.claim(HOST, "resize", settings=settings, worker="gone", now=t0 + 1_000)
    store.unclaim(HOST, "resize", task.id, settings=settings, worker="gone", attempt=1,
                  now=t0 + 1_010)  # fmt: skip
    store.claim(HOST, "resize", settings=settings, worker="box-1", now=t0 + 3_000)
    store.finish(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=1,
                 result={}, now=t0 + 3_500)  # fmt: skip
    call_command("ingest_tasklogs", "--source", str(day_dir), stdout=io.StringIO())
    client.force_login(get_user_model().objects.create_user("root", is_staff=True))

    html = client.get(reverse("queues:task", args=[HOST, "resize", task.id])).content.decode()
    rows = attempt_rows(html)
    assert [(r[0], r[1], r[2], r[4], r[6]) for r in rows] == [
        ("1", "box-1", "3.0 s", "500 ms", "result")
    ]
