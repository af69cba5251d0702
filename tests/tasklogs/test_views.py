"""The Task Logs pages: filters, keyset pages, the tenant rule, escaping, the payload view."""

from __future__ import annotations

import io
import re
from itertools import chain
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from queues.services import grant
from tasklogs.ingest import ingest_directory
from tasklogs.queries import PAGE_SIZE, TIMELINE_PAGE

from .conftest import DAY1, TASK, line

pytestmark = pytest.mark.django_db
HOST, OTHER = "task.example.com", "other.example.com"
ROW = re.compile(r'href="/logs/([^/]+)/([^/]+)/([0-9a-f]{16})/"')


@pytest.fixture
def queues(make_queue):
    return make_queue(HOST, "resize"), make_queue(HOST, "thumbs"), make_queue(OTHER, "resize")


@pytest.fixture
def operator(queues, client):
    """A user who operates task.example.com/resize only, logged in."""
    grant("olga", f"{HOST}/resize", "operator")
    grant("olga", f"{HOST}/thumbs", "producer")  # a producer is no operator
    client.force_login(get_user_model().objects.get(username="olga"))
    return client


@pytest.fixture
def staff(queues, client):
    client.force_login(get_user_model().objects.create_user("root", is_staff=True))
    return client


@pytest.fixture
def logged(append, day_dir: Path):
    """Write lines to the day-file and ingest them."""

    def write(*lines: dict) -> None:
        append("2025-01-01", *lines)
        ingest_directory(day_dir)

    return write


def task_ids(response) -> list[str]:
    return [m.group(3) for m in ROW.finditer(response.content.decode())]


def test_an_operator_sees_only_the_queues_they_operate(operator, logged) -> None:
    logged(line(task_id="a" * 16), line(queue="thumbs", task_id="b" * 16),
           line(host=OTHER, task_id="c" * 16))  # fmt: skip
    response = operator.get(reverse("tasklogs:events"))
    assert response.status_code == 200
    assert task_ids(response) == ["a" * 16]
    for host, queue, task in ((HOST, "thumbs", "b" * 16), (OTHER, "resize", "c" * 16)):
        assert operator.get(reverse("tasklogs:task", args=[host, queue, task])).status_code == 404
    own = reverse("tasklogs:task", args=[HOST, "resize", "a" * 16])
    assert operator.get(own).status_code == 200
    # Filtering for another queue does not reach past the rule either.
    assert task_ids(operator.get(reverse("tasklogs:events"), {"queue": "thumbs"})) == []


def test_staff_see_every_configured_queue(staff, logged) -> None:
    logged(line(task_id="a" * 16), line(host=OTHER, task_id="c" * 16, ms=1))
    assert task_ids(staff.get(reverse("tasklogs:events"))) == ["c" * 16, "a" * 16]


def test_anonymous_users_are_sent_to_log_in_and_others_get_404(queues, client, logged) -> None:
    logged(line())
    urls = [reverse("tasklogs:events"), reverse("tasklogs:task", args=[HOST, "resize", TASK])]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    grant("pat", f"{HOST}/resize", "producer")
    client.force_login(get_user_model().objects.get(username="pat"))
    for url in urls:
        assert client.get(url).status_code == 404


def test_filters_narrow_the_list_and_are_shareable_urls(staff, logged) -> None:
    logged(
        line(task_id="1" * 16, event="posted", t=DAY1),
        line(task_id="1" * 16, event="claimed", worker="box-1", status="processing", t=DAY1 + 60),
        line(task_id="2" * 16, event="posted", queue="thumbs", t=DAY1 + 120),
        line(task_id="3" * 16, event="posted", host=OTHER, t=DAY1 + 180),
    )
    url = reverse("tasklogs:events")
    cases = {
        (("host", OTHER),): ["3" * 16],
        (("queue", "thumbs"),): ["2" * 16],
        (("task", "1" * 16),): ["1" * 16, "1" * 16],
        (("event", "claimed"),): ["1" * 16],
        (("worker", "box-1"),): ["1" * 16],
        (("since", "2025-01-01T00:01"), ("until", "2025-01-01T00:03")): ["2" * 16, "1" * 16],
        (("host", HOST), ("queue", "resize"), ("event", "posted")): ["1" * 16],
    }
    for params, expected in cases.items():
        assert task_ids(staff.get(url, dict(params))) == expected, params


def test_invalid_filters_are_explained_not_run(staff, logged) -> None:
    logged(line())
    response = staff.get(reverse("tasklogs:events"), {"host": "../etc", "before": "x"})
    assert response.status_code == 200
    assert "You operate no queue on the host ../etc." in response.content.decode()
    assert task_ids(response) == []


def test_host_and_queue_are_choices_among_the_operated_queues(operator, logged) -> None:
    logged(line(task_id="a" * 16))
    form = operator.get(reverse("tasklogs:events")).context["form"]
    assert [value for value, _ in form.fields["host"].choices] == ["", HOST]
    assert [value for value, _ in form.fields["queue"].choices] == ["", "resize"]
    # A queue the operator does not operate is explained, and nothing of it is listed.
    response = operator.get(reverse("tasklogs:events"), {"queue": "thumbs"})
    assert "You operate no queue named thumbs." in response.content.decode()
    assert task_ids(response) == []


def test_pages_walk_the_whole_list_in_a_stable_order(staff, logged) -> None:
    # Several events share each instant, so the order must break ties by id.
    total = PAGE_SIZE * 2 + 7
    logged(*(line(task_id=f"{i:016x}", t=DAY1 + i // 4, ms=50) for i in range(total)))
    url, seen, pages = reverse("tasklogs:events"), [], []
    query: dict[str, str] = {"queue": "resize"}
    while True:
        response = staff.get(url, query)
        pages.append(response)
        seen += task_ids(response)
        older = re.search(r'href="\?([^"]*before=[^"]+)" rel="next"', response.content.decode())
        if not older:
            break
        query = dict(p.split("=") for p in older.group(1).replace("&amp;", "&").split("&"))
        assert query["queue"] == "resize"  # the filters travel with the page
    assert len(pages) == 3
    expected = sorted((f"{i:016x}" for i in range(total)), reverse=True)
    assert seen == expected
    # Going back from the last page gives the middle page again.
    newer = re.search(r'href="\?([^"]*after=[^"]+)" rel="prev"', pages[2].content.decode())
    back = staff.get(url + "?" + newer.group(1).replace("&amp;", "&"))
    assert task_ids(back) == task_ids(pages[1])


def test_the_timeline_shows_every_event_with_sizes_and_payload_links(staff, logged) -> None:
    sizes = {"item": 11, "progress": 22, "result": 33, "error": 0}
    logged(
        line(event="posted", archived=["item"]),
        line(event="claimed", status="processing", worker="box-1", t=DAY1 + 1),
        line(event="result", status="finished", worker="box-1", t=DAY1 + 2, sizes=sizes,
             archived=["result"]),
        line(task_id="f" * 16, event="posted"),
    )  # fmt: skip
    response = staff.get(reverse("tasklogs:task", args=[HOST, "resize", TASK]))
    html = response.content.decode()
    assert re.findall(r'class="status-(\w+) card-title">\1</td>\s*<td class="status', html) == [
        "posted", "claimed", "result"]  # fmt: skip
    assert "<dt>result</dt><dd>33 B</dd>" in html  # in the row's details
    item = reverse("tasklogs:payload-page", args=[HOST, "resize", TASK, "item"])
    # a result is the one its event's attempt wrote: the address names the attempt and event
    result = reverse(
        "tasklogs:event-payload-page", args=[HOST, "resize", TASK, "result", 0, "result"]
    )
    for link in (item, result):
        assert html.count(f'href="{link}" target="_blank" rel="noopener"') == 2  # row and list
    assert "result of attempt 0 (result)</a>" in html
    assert "No longer in the store" in html


def test_the_timeline_shows_the_task_as_the_store_holds_it(staff, queues, day_dir) -> None:
    from queues import stores

    settings = queues[0].to_settings()
    task = (
        stores.of(HOST, "resize")
        .post(HOST, "resize", {"n": 1}, settings=settings, posted_by=None)
        .task
    )
    ingest_directory(day_dir)  # the store's own "posted" line
    html = staff.get(reverse("tasklogs:task", args=[HOST, "resize", task.id])).content.decode()
    assert 'Now in the store: <strong class="status-pending">pending</strong>' in html
    assert '<td class="status-posted card-title">posted</td>' in html


WORKER = re.compile(r'<td data-label="worker">(w\d{5})</td>')
LINK = re.compile(r'href="\?((?:after|before)=[^"]+)" rel="(next|prev)"')


def long_task(logged, total: int) -> list[str]:
    """`total` events of one task, several to each instant; each names its place as its worker."""
    workers = [f"w{i:05d}" for i in range(total)]
    logged(
        line(event="posted", worker=workers[0]),
        *(line(event="progress", status="processing", worker=w, t=DAY1 + i // 7, ms=i % 7)
          for i, w in enumerate(workers[1:-1], start=1)),
        line(event="result", status="finished", worker=workers[-1], t=DAY1 + total),
    )  # fmt: skip
    return workers


def follow(client, url: str, response, rel: str) -> tuple[list[list[str]], list]:
    """The workers of each page reached by following `rel` links from `response`."""
    pages, responses = [], []
    while link := dict((r, q) for q, r in LINK.findall(response.content.decode())).get(rel):
        response = client.get(url + "?" + link.replace("&amp;", "&"))
        assert response.status_code == 200
        pages.append(WORKER.findall(response.content.decode()))
        responses.append(response)
    return pages, responses


def test_a_long_timeline_shows_how_it_began_and_ended_and_pages_between(staff, logged) -> None:
    total = 2101  # more than the 2,000 events a timeline once stopped at
    assert total > 3 * TIMELINE_PAGE  # so there are whole pages between the first and the last
    workers = long_task(logged, total)
    url = reverse("tasklogs:task", args=[HOST, "resize", TASK])
    first = staff.get(url)
    shown = WORKER.findall(first.content.decode())
    # The first view: the first page and the last page, the posted and the result line.
    assert shown == workers[:TIMELINE_PAGE] + workers[-TIMELINE_PAGE:]
    html = first.content.decode()
    assert '<td class="status-posted card-title">posted</td>' in html
    assert '<td class="status-result card-title">result</td>' in html
    # Following "later" from the first view walks every event between, in order, each once.
    later, responses = follow(staff, url, first, "next")
    assert all(len(page) == TIMELINE_PAGE for page in later[:-1])
    assert workers[:TIMELINE_PAGE] + list(chain(*later)) == workers
    # And "earlier" from the last of those pages walks back to the start.
    earlier, _ = follow(staff, url, responses[-1], "prev")
    assert list(chain(*reversed(earlier), later[-1])) == workers


def test_a_short_timeline_is_one_page_without_links(staff, logged) -> None:
    workers = long_task(logged, TIMELINE_PAGE + 5)  # first and last pages overlap: one list
    html = staff.get(reverse("tasklogs:task", args=[HOST, "resize", TASK])).content.decode()
    assert WORKER.findall(html) == workers
    assert LINK.findall(html) == []


@pytest.mark.parametrize(
    "query", ["after=x", "before=1-", "after=99999999999999999999-1", "after=1-1&before=1-1"]
)
def test_a_bad_timeline_page_is_a_clear_400(staff, logged, query: str) -> None:
    logged(line())
    response = staff.get(reverse("tasklogs:task", args=[HOST, "resize", TASK]) + "?" + query)
    assert response.status_code == 400
    assert "Not a page of this timeline" in response.content.decode()


def test_a_timeline_page_past_the_end_is_empty_and_links_back(staff, logged) -> None:
    long_task(logged, 3)
    url = reverse("tasklogs:task", args=[HOST, "resize", TASK])
    response = staff.get(url, {"after": f"{(DAY1 + 99) * 1_000_000}-1"})
    assert response.status_code == 200
    assert WORKER.findall(response.content.decode()) == []
    assert f'href="{url}"' in response.content.decode()  # back to the first and last events


def test_a_task_nobody_knows_is_404(staff) -> None:
    assert staff.get(reverse("tasklogs:task", args=[HOST, "resize", TASK])).status_code == 404


def test_markup_in_a_worker_name_is_shown_escaped(staff, logged) -> None:
    logged(line(worker="<script>alert(1)</script>", event="claimed", status="processing"))
    for url in (reverse("tasklogs:events"), reverse("tasklogs:task", args=[HOST, "resize", TASK])):
        html = staff.get(url).content.decode()
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "<script>alert" not in html


# --- the payload view ---------------------------------------------------------------------


@pytest.fixture
def archive(store_dirs) -> Path:
    folder = store_dirs["logs"] / "tasks-payloads" / HOST / "resize" / TASK
    folder.mkdir(parents=True)
    (folder / "item.json").write_bytes(b'{"x":"<script>alert(1)</script>"}')
    (folder / "progress.jsonl").write_bytes(b'{"p":1}\n{"p":2}\n')
    return folder


def payload_url(kind: str = "item", host: str = HOST, queue: str = "resize", task: str = TASK):
    return f"/logs/{host}/{queue}/{task}/payloads/{kind}"


def test_the_payload_is_served_raw_and_inert(staff, archive: Path) -> None:
    response = staff.get(payload_url())
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b'{"x":"<script>alert(1)</script>"}'
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert response["Content-Disposition"] == f'inline; filename="{TASK}-item.json"'
    progress = staff.get(payload_url("progress"))
    assert b"".join(progress.streaming_content) == b'{"p":1}\n{"p":2}\n'
    assert progress["Content-Disposition"] == f'inline; filename="{TASK}-progress.jsonl"'


def test_the_posted_items_link_opens_the_posted_item_after_an_edit(staff, archive: Path) -> None:
    """item.json holds the latest item (the seed's file); from the first edit on, the posted
    one is kept as 0-posted.item.json, which the posted line's link opens."""
    (archive / "0-posted.item.json").write_bytes(b'{"v":1}')
    (archive / "item.json").write_bytes(b'{"v":2}')
    assert b"".join(staff.get(payload_url()).streaming_content) == b'{"v":1}'


def test_the_payload_page_says_what_the_payload_is_and_escapes_it(staff, archive: Path) -> None:
    response = staff.get(payload_url() + "/view")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'The item of task <span class="mono">{TASK}</span>' in html
    assert f'href="/logs/{HOST}/resize/{TASK}/"' in html  # back to the timeline
    assert "<script>alert(1)" not in html
    assert "&quot;x&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in html  # indented
    assert "33 bytes" in html and f'<a href="{payload_url()}">The raw JSON file</a>' in html
    progress = staff.get(payload_url("progress") + "/view").content.decode()
    assert "{&quot;p&quot;:1}\n{&quot;p&quot;:2}" in progress  # JSON lines stay lines


def test_a_large_payload_page_shows_its_head_and_links_the_whole(staff, archive: Path) -> None:
    from tasklogs.payload_pages import SHOWN_BYTES

    (archive / "item.json").write_bytes(b'["' + b"a" * SHOWN_BYTES + b'"]')
    html = staff.get(payload_url() + "/view").content.decode()
    assert "The first 524288 characters are shown" in html
    assert "a" * 1000 in html and "a" * (SHOWN_BYTES + 1) not in html


def test_payload_pages_follow_the_tenant_rule(operator, archive: Path) -> None:
    assert operator.get(payload_url() + "/view").status_code == 200
    assert operator.get(payload_url(host=OTHER) + "/view").status_code == 404
    assert operator.get(payload_url("nothing") + "/view").status_code == 404


def test_payloads_follow_the_tenant_rule(operator, archive: Path) -> None:
    other = archive.parents[2] / OTHER / "resize" / TASK
    other.mkdir(parents=True)
    (other / "item.json").write_bytes(b"{}")
    assert operator.get(payload_url()).status_code == 200
    assert operator.get(payload_url(host=OTHER)).status_code == 404
    operator.logout()
    assert operator.get(payload_url()).status_code == 302


@pytest.mark.parametrize(
    "path",
    [
        f"/logs/{HOST}/resize/{TASK}/payloads/result",  # not archived
        f"/logs/{HOST}/resize/{TASK}/payloads/secrets",
        f"/logs/{HOST}/resize/{TASK}/payloads/..",
        f"/logs/{HOST}/resize/{TASK}/payloads/item.json",
        f"/logs/{HOST}/resize/../payloads/item",
        f"/logs/{HOST}/../{TASK}/payloads/item",
        f"/logs/{HOST}/resize/..%2F..%2F..%2Fsettings/payloads/item",
        f"/logs/{HOST}%2Fresize/x/{TASK}/payloads/item",
        f"/logs/{HOST}/resize/{TASK}%00/payloads/item",
        f"/logs/{HOST}/resize%00/{TASK}/payloads/item",
        f"/logs/{HOST}/resize/{TASK.upper()}/payloads/item",
        f"/logs/{HOST.upper()}/resize/{TASK}/payloads/item",
        f"/logs/{HOST}/RESIZE/{TASK}/payloads/item",
        f"/logs/{HOST}/resize/{TASK}/payloads/ITEM",
        f"/logs/..%2F..%2Fitems/resize/{TASK}/payloads/item",
        f"/logs/{HOST}/resize/{TASK}/payloads/result/1/failed",  # not archived
        f"/logs/{HOST}/resize/{TASK}/payloads/item/0/posted",  # one item per task
        f"/logs/{HOST}/resize/{TASK}/payloads/result/1/bogus",
        f"/logs/{HOST}/resize/{TASK}/payloads/result/1/..",
        f"/logs/{HOST}/resize/{TASK}/payloads/result/-1/failed",
        f"/logs/{HOST}/resize/{TASK}/payloads/result/99999999999999999999/failed",
    ],
)
def test_anything_but_an_archived_payload_is_404(staff, archive: Path, path: str) -> None:
    assert staff.get(path).status_code == 404


def test_a_symlink_planted_in_the_archive_is_never_followed(staff, archive, tmp_path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "hunter2"}')
    (archive / "result.json").symlink_to(secret)
    assert staff.get(payload_url("result")).status_code == 404
    # an event's own file planted as a link is refused, not stepped over to the old layout's
    (archive / "error.json").write_text('"attempts"')
    (archive / "1-failed.error.json").symlink_to(secret)
    assert staff.get(payload_url("error/1/failed")).status_code == 404
    assert staff.get(payload_url("error/2/failed")).status_code == 200  # absent: the old file
    # A symlinked task directory, and a symlinked queue directory, likewise.
    outside = tmp_path / "outside" / TASK
    outside.mkdir(parents=True)
    (outside / "item.json").write_text("{}")
    (archive.parent / ("e" * 16)).symlink_to(outside)
    assert staff.get(payload_url(task="e" * 16)).status_code == 404
    (archive.parents[1] / "thumbs").symlink_to(archive.parent)
    assert staff.get(payload_url(queue="thumbs")).status_code == 404


def test_the_list_never_inlines_a_payload(staff, logged, archive: Path) -> None:
    logged(line(archived=["item"]))
    html = staff.get(reverse("tasklogs:events")).content.decode()
    assert "alert(1)" not in html
    assert f'href="{payload_url()}/view" target="_blank" rel="noopener"' in html


# --- each attempt's bodies -------------------------------------------------------------------

ROW_HTML = re.compile(r"<tr>(.*?)</tr>", re.S)
ROW_EVENT = re.compile(r'<td class="status-(\w+) card-title">\1</td>')
ROW_ATTEMPTS = re.compile(r'<td class="num" data-label="attempts">(\d+)</td>')
HREF = re.compile(r'href="([^"]+/payloads/[^"]+)"')


def payload_links(html: str) -> dict[tuple[str, int], list[str]]:
    """(event, attempts) of each timeline row -> the payload links in that row."""
    links = {}
    for row in ROW_HTML.findall(html):
        event, attempts = ROW_EVENT.search(row), ROW_ATTEMPTS.search(row)
        if event and attempts:
            links[(event.group(1), int(attempts.group(1)))] = HREF.findall(row)
    return links


RAW = re.compile(r'<a href="([^"]+)">The raw JSON file</a>')


def opened(client, link: str) -> bytes:
    """What a payload link opens: its page, then the raw file that page links to."""
    page = client.get(link.replace("&amp;", "&"))
    assert page.status_code == 200, link
    raw = client.get(RAW.search(page.content.decode()).group(1))
    assert raw.status_code == 200, link
    return b"".join(raw.streaming_content)


def test_each_events_payload_link_opens_that_attempts_body(
    staff, make_queue, day_dir, store_kind
) -> None:
    """Two failed attempts, then a result: the store archives each apart, and every event's
    link (in the timeline and in the list) opens what that attempt said. On a PostgreSQL queue
    the events are Task Logs' rows already when the store shares Django's database (the
    ingestion below finds no day-file line of it, and must not trip over its rows), or the
    ingestion copies them from the store's database (TASKHOSTER_PG_STORE_URL); the bodies come
    from the database's archive."""
    from django.core.management import call_command

    from queues import stores

    queue = make_queue(HOST, "retries", archive_payloads=True, max_attempts=3, store=store_kind)
    settings, store = queue.to_settings(), stores.of(HOST, "retries")
    now = DAY1 * 1000
    task = store.post(HOST, "retries", {"n": 1}, settings=settings, posted_by=None, now=now).task
    report = {"settings": settings, "worker": "box-1"}
    for attempt in (1, 2):
        now += 3_600_000
        store.claim(HOST, "retries", settings=settings, worker="box-1", now=now)
        store.fail(HOST, "retries", task.id, attempt=attempt, result={"e": attempt}, retry=True,
                   now=now + 1, **report)  # fmt: skip
    now += 3_600_000
    store.claim(HOST, "retries", settings=settings, worker="box-1", now=now)
    store.finish(HOST, "retries", task.id, attempt=3, result={"r": 3}, now=now + 1, **report)
    call_command("ingest_tasklogs", "--source", str(day_dir), stdout=io.StringIO())
    if store_kind == "postgres":  # what the pages show came from the database alone
        assert not any(day_dir.iterdir())

    html = staff.get(reverse("tasklogs:task", args=[HOST, "retries", task.id])).content.decode()
    links = payload_links(html)
    assert [opened(staff, link) for link in links[("posted", 0)]] == [b'{"n":1}']
    assert [opened(staff, link) for link in links[("requeue", 1)]] == [b'{"e":1}']
    assert [opened(staff, link) for link in links[("requeue", 2)]] == [b'{"e":2}']
    assert [opened(staff, link) for link in links[("result", 3)]] == [b'{"r":3}']
    # The list links each row likewise (newest first: the result, then attempt 2, then 1).
    listed = staff.get(reverse("tasklogs:events"), {"task": task.id}).content.decode()
    bodies = [opened(staff, link) for link in HREF.findall(listed)]
    assert bodies == [b'{"r":3}', b'{"e":2}', b'{"e":1}', b'{"n":1}']


def test_an_archive_in_the_old_layout_still_opens(staff, logged, archive: Path) -> None:
    """Archives written before each attempt had its own file kept one result.json and one
    error.json: an event's link, and the old address, open those."""
    (archive / "result.json").write_bytes(b'{"why":"bad png"}')
    (archive / "error.json").write_bytes(b'"attempts"')
    logged(
        line(event="posted", archived=["item"]),
        line(event="claimed", status="processing", attempts=1, worker="box-1", t=DAY1 + 1),
        line(event="failed", status="failed", attempts=1, worker="box-1", t=DAY1 + 2,
             archived=["result", "error"]),
    )  # fmt: skip
    html = staff.get(reverse("tasklogs:task", args=[HOST, "resize", TASK])).content.decode()
    failed = [opened(staff, link) for link in payload_links(html)[("failed", 1)]]
    assert failed == [b'{"why":"bad png"}', b'"attempts"']
    assert opened(staff, payload_url("result") + "/view") == b'{"why":"bad png"}'


def test_the_admin_lists_events_read_only(admin_client, logged, queues) -> None:
    logged(line(), line(event="claimed", status="processing", worker="box-1", ms=1))
    url = reverse("admin:tasklogs_taskevent_changelist")
    response = admin_client.get(url, {"event": "claimed"})
    assert response.status_code == 200
    assert response.context["cl"].result_count == 1
    assert admin_client.get(url, {"q": TASK}).context["cl"].result_count == 2
    assert admin_client.get(url, {"host": OTHER}).context["cl"].result_count == 0
    assert admin_client.get(reverse("admin:tasklogs_taskevent_add")).status_code == 403
