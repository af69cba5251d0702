"""The console's queue page: tabs with counts, order, paging, search, previews, settings and
links; the bulk actions on ticked tasks and on everything a filter matches, with their counts
and their chunks; who may see and do any of it."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues import stores
from queues.console import bulk, queue_page
from queues.store import QueueSettings
from tests.test_console import client_for

pytestmark = pytest.mark.django_db
HOST, NAME = "task.example.com", "resize"
URL = f"/console/{HOST}/{NAME}/"
BULK = URL + "bulk"
T0 = 1_751_500_000_000


@pytest.fixture
def resize(request, make_queue):
    """The queue, on files; `each_store` runs a test on a PostgreSQL queue too."""
    kind = getattr(request, "param", "files")
    if kind == "postgres":
        request.getfixturevalue("pg_store")
    return make_queue(HOST, NAME, store=kind)


each_store = pytest.mark.parametrize("resize", ["files", "postgres"], indirect=True)


@pytest.fixture
def staff():
    return client_for("sam", is_staff=True)


def post(queue, item=None, *, now=None, **kw):
    return stores.of(HOST, NAME).post(HOST, NAME, item or {"n": 1}, settings=queue.to_settings(),
                            posted_by="alice", now=now, **kw).task  # fmt: skip


def status_of(task) -> str:
    return stores.of(HOST, NAME).read(HOST, NAME, task.id).status.value


def page_of(client, query: str = "") -> str:
    response = client.get(URL + query)
    assert response.status_code == 200
    return response.content.decode()


def listed(page: str) -> list[str]:
    return re.findall(r'name="ids" value="([0-9a-f]{16})"', page)


def tab(page: str, name: str) -> str:
    found = re.search(rf'data-tab="{name}"[^>]*>(.*?)</a>', page, re.S)
    assert found, name
    return re.sub(r"<[^>]+>", " ", found[1]).split()


def hidden_fields(page: str) -> list[tuple[str, str]]:
    return [(n, html.unescape(v))
            for n, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page)
            if n != "csrfmiddlewaretoken"]  # fmt: skip


# -- who may see it ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "seen"),
    [("staff", True), ("operator", True), ("other_operator", False), ("producer", False),
     ("nobody", False)],
)  # fmt: skip
def test_the_page_and_its_bulk_actions_by_who_asks(resize, make_queue, who, seen):
    task = post(resize)
    other = make_queue("other.example.com", "secret")
    client = {
        "staff": lambda: client_for("sam", is_staff=True),
        "operator": lambda: client_for("olga", role="operator", queue=resize),
        "other_operator": lambda: client_for("otto", role="operator", queue=other),
        "producer": lambda: client_for("pat", role="producer", queue=resize),
        "nobody": lambda: client_for("nina"),
    }[who]()
    assert client.get(URL).status_code == (200 if seen else 404)
    missing = client.get("/console/nowhere.example.com/none/")
    response = client.post(BULK, {"do": "cancel:selected", "ids": task.id, "confirm": "1"})
    if seen:
        assert response.status_code == 302 and status_of(task) == "cancelled"
    else:
        assert response.status_code == 404 and status_of(task) == "pending"
        assert client.get(URL).content == missing.content


def test_bulk_actions_need_post_and_a_csrf_token(resize):
    task = post(resize)
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_user("sam", is_staff=True))
    assert client.get(BULK).status_code == 405
    answer = client.post(BULK, {"do": "cancel:selected", "ids": task.id, "confirm": "1"})
    assert answer.status_code == 403 and status_of(task) == "pending"


# -- what it shows -----------------------------------------------------------------------------


@each_store
def test_tabs_count_every_state_and_the_waiting_pending_ones(resize, staff):
    store, settings = stores.of(HOST, NAME), resize.to_settings()
    # each claim takes the one pending task, so the claim order (the file store's oldest
    # first, the PostgreSQL store's post order) does not matter
    running = post(resize, {"run": 1}, now=T0)
    [claimed] = store.claim(HOST, NAME, settings=settings, worker="box-7")
    assert claimed.id == running.id
    failing = post(resize, {"fail": 1}, now=T0 - 10)
    store.claim(HOST, NAME, settings=settings, worker="box-7")
    for _ in range(3):
        post(resize)
    post(resize, delay_seconds=3600)
    store.fail(HOST, NAME, failing.id, settings=settings, worker="box-7", attempt=1,
               result={"why": "disk full"}, retry=True)  # fmt: skip
    store.cancel(HOST, NAME, post(resize).id, settings=settings)
    page = page_of(staff)
    assert tab(page, "all") == ["all", "7"]
    assert tab(page, "pending") == ["pending", "5", "1", "delayed", "·", "1", "waiting", "to",
                                    "retry"]  # fmt: skip
    assert tab(page, "processing") == ["processing", "1"]
    assert tab(page, "finished") == ["finished", "0"]
    assert tab(page, "cancelled") == ["cancelled", "1"]
    processing = page_of(staff, "?status=processing")
    assert listed(processing) == [running.id] and "box-7" in processing
    assert 'aria-current="page">processing' in processing.replace(' data-tab="processing"', "")


@each_store
def test_the_columns_preview_worker_times_and_cancel_requested_once(resize, staff):
    store, settings = stores.of(HOST, NAME), resize.to_settings()
    failed_task = post(resize, {"url": "https://a.example/1"}, now=T0)
    store.claim(HOST, NAME, settings=settings, worker="box-1")
    store.fail(HOST, NAME, failed_task.id, settings=settings, worker="box-1", attempt=1,
               result={"why": "404 from the origin"})  # fmt: skip
    running = post(resize, {"url": "https://a.example/2"}, now=T0 + 1)
    store.claim(HOST, NAME, settings=settings, worker="box-2")
    store.cancel(HOST, NAME, running.id, settings=settings)
    page = page_of(staff)
    assert "{&quot;why&quot;: &quot;404 from the origin&quot;}" in page
    assert "https://a.example/2" in page
    assert page.count("cancel requested") == 1 and "box-2" in page
    exact = r'<time datetime="2025-07-02T23:46:40.000\+00:00" title="2025-07-02 23:46:40.000 UTC">'
    assert re.search(exact + r"\d+ days? ago</time>", page)
    assert re.search(r"<time [^>]*>just now</time>", page)  # updated a moment ago


@each_store
def test_newest_or_oldest_first_and_paging(resize, staff):
    tasks = [post(resize, now=T0 + i) for i in range(queue_page.PAGE_SIZE + 5)]
    newest = listed(page_of(staff))
    assert newest[0] == tasks[-1].id and len(newest) == queue_page.PAGE_SIZE
    assert listed(page_of(staff, "?page=2")) == [t.id for t in reversed(tasks[:5])]
    oldest = page_of(staff, "?order=oldest")
    assert listed(oldest)[0] == tasks[0].id and "page 1 of 2" in oldest
    assert 'href="?order=oldest&amp;page=2"' in oldest
    assert listed(page_of(staff, "?page=999")) == [] and page_of(staff, "?page=x&status=bogus")


@each_store
def test_search_by_id_prefix_and_exact_id(resize, staff):
    tasks = [post(resize, now=T0 + i) for i in range(20)]
    one = tasks[7]
    assert listed(page_of(staff, f"?q={one.id}")) == [one.id]
    assert listed(page_of(staff, f"?q={one.id.upper()[:16]}")) == [one.id]
    prefix = one.id[:2]
    assert set(listed(page_of(staff, f"?q={prefix}"))) == {
        t.id for t in tasks if t.id.startswith(prefix)
    }


def test_search_by_a_field_of_the_item_pages_on_by_cursor(resize, staff, monkeypatch):
    tasks = [post(resize, {"url": f"https://{'foo' if i % 3 == 0 else 'bar'}.example/{i}"},
                  now=T0 + i) for i in range(30)]  # fmt: skip
    foo = [t.id for t in reversed(tasks) if "foo" in t.item["url"]]
    page = page_of(staff, "?q=item.url+contains+FOO")
    assert listed(page) == foo and "end of the list" in page
    monkeypatch.setattr(queue_page, "SCAN_BUDGET", 7)
    seen, query = [], "?q=item.url+contains+foo"
    while True:
        page = page_of(staff, query)
        seen += listed(page)
        more = re.search(r'<a href="(\?[^"]+)" rel="next">', page)
        if not more:
            break
        query = html.unescape(more[1])
    assert seen == foo


def test_a_malformed_search_says_why_escaped(resize, staff):
    post(resize)
    page = page_of(staff, "?q=<b>item.url</b> is near")
    assert "is not a search" in page and "&lt;b&gt;item.url&lt;/b&gt;" in page
    assert "<b>item.url</b>" not in page
    assert 'aria-invalid="true"' in page and listed(page) == []
    assert "after the field comes contains" in page_of(staff, "?q=item.url+like+x")
    doubled = page_of(staff, "?q=" + quote("item.user.name = = dave"))
    assert 'id="search-error"' in doubled and "has two operators" in doubled
    assert "Fix the search to see tasks." in doubled


def test_records_read_are_for_staff_who_ask_not_for_operators(resize, staff):
    post(resize, {"url": "https://foo.example/1"})
    operator = client_for("olga", role="operator", queue=resize)
    # An operator does not see it even when asking; staff see it only when asking.
    for page in (page_of(operator, "?q=item.url+contains+foo&debug=1"),
                 page_of(staff, "?q=item.url+contains+foo")):  # fmt: skip
        assert "Tasks whose record passes the search, newest first." in page
        assert "read for this page" not in page
    debug = page_of(staff, "?q=item.url+contains+foo&debug=1")
    assert "(1 record read for this page)" in debug


def test_user_strings_are_escaped_everywhere(resize, staff):
    post(resize, {"x": "<script>alert(1)</script>"})
    page = page_of(staff, "?q=item.x+contains+<script>")
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_settings_at_a_glance_and_the_links(resize):
    resize.lease_seconds, resize.queue_seconds = 90, 86_400
    resize.save()
    admin = client_for("root", is_staff=True, is_superuser=True)
    page = page_of(admin)
    assert "<dt>lease</dt><dd>1 min 30 s</dd>" in page
    assert "<dt>queue timeout</dt><dd>1 day</dd>" in page
    assert f'href="/admin/queues/queue/{resize.pk}/change/"' in page
    assert f'href="/console/{HOST}/{NAME}/insight/"' in page
    assert f'href="/logs/?host={HOST}&amp;queue={NAME}"' in page
    olga = client_for("olga", role="operator", queue=resize)
    operator = page_of(olga)
    assert "/admin/queues/queue/" not in operator and "<dt>lease</dt>" in operator
    logs = olga.get(f"/logs/?host={HOST}&queue={NAME}").content.decode()  # the link, followed
    assert f'<option value="{NAME}" selected>' in logs
    form = admin.get(f"/admin/queues/queue/{resize.pk}/change/").content.decode()
    assert f'href="/console/{HOST}/{NAME}/"' in form


def test_a_queue_never_posted_to(resize, staff):
    page = page_of(staff)
    assert "Nothing posted to this queue yet." in page and tab(page, "all") == ["all", "0"]


@pytest.mark.parametrize(
    ("status", "actions"),
    [("pending", ["cancel"]), ("processing", ["cancel", "requeue"]),
     ("failed", ["retry", "delete"]), ("cancelled", ["retry", "delete"]),
     ("finished", ["delete"])],
)  # fmt: skip
def test_each_tab_offers_only_the_actions_its_state_allows(resize, staff, status, actions):
    store, settings = stores.of(HOST, NAME), resize.to_settings()
    for make in ("finished", "failed", "cancelled", "processing", "pending"):
        task = post(resize)
        if make == "cancelled":
            store.cancel(HOST, NAME, task.id, settings=settings)
        elif make != "pending":
            [claimed] = store.claim(HOST, NAME, settings=settings, worker="w")
            if make == "finished":
                store.finish(HOST, NAME, claimed.id, settings=settings, worker="w", attempt=1,
                             result=None)  # fmt: skip
            elif make == "failed":
                store.fail(HOST, NAME, claimed.id, settings=settings, worker="w", attempt=1)
    page = page_of(staff, f"?status={status}")
    assert re.findall(r'name="do" value="(\w+):filter"', page) == actions
    assert re.findall(r'name="do" value="(\w+):selected"', page) == actions


def test_the_all_tab_offers_ticked_actions_only_for_states_present(resize, staff):
    post(resize)
    page = page_of(staff)
    assert re.findall(r'name="do" value="(\w+):selected"', page) == ["cancel"]
    assert ":filter" not in page and "tab first." in page


# -- bulk actions ------------------------------------------------------------------------------


def test_ticked_tasks_are_counted_then_acted_on_with_refusals_per_code(resize):
    store, settings = stores.of(HOST, NAME), resize.to_settings()
    pending = [post(resize) for _ in range(3)]
    done = post(resize)
    store.cancel(HOST, NAME, done.id, settings=settings)
    client = client_for("olga", role="operator", queue=resize)
    ids = [t.id for t in pending[:2]] + [done.id]
    confirm = client.post(BULK, {"do": "cancel:selected", "ids": ids, "status": "pending"})
    page = confirm.content.decode()
    assert "Cancel 3 tasks?" in page and [t.id for t in pending] != []
    assert all(status_of(t) == "pending" for t in pending)  # nothing yet
    fields = hidden_fields(page)
    assert ("ids", done.id) in fields and ("status", "pending") in fields
    answer = client.post(BULK, dict_of(fields), follow=True)
    assert answer.redirect_chain[-1][0] == URL + "?status=pending"
    assert "cancel: 2 done, 1 refused (1 not_cancellable)." in answer.content.decode()
    assert [status_of(t) for t in pending] == ["cancelled", "cancelled", "pending"]


def dict_of(fields: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in fields:
        out.setdefault(name, []).append(value)
    return out


def test_everything_a_filter_matches_in_chunks_leaving_later_posts_alone(resize, monkeypatch):
    monkeypatch.setattr(bulk, "CHUNK", 4)
    matching = [post(resize, {"url": f"https://foo.example/{i}"}, now=T0 + i) for i in range(10)]
    others = [post(resize, {"url": "https://bar.example/"}, now=T0 + 20) for _ in range(3)]
    client = client_for("olga", role="operator", queue=resize)
    form = {"do": "cancel:filter", "status": "pending", "q": "item.url contains foo"}
    page = client.post(BULK, form).content.decode()
    assert "Cancel 10 tasks?" in page and "<strong data-count>10</strong>" in page
    late = post(resize, {"url": "https://foo.example/late"})  # after the count
    fields, chunks = hidden_fields(page), 0
    while True:
        answer = client.post(BULK, dict_of(fields))
        chunks += 1
        if answer.status_code == 302:
            break
        page = answer.content.decode()
        assert "data-autosubmit" in page and "working through the tasks" in page
        fields = hidden_fields(page)
    assert chunks >= 3  # 10 tasks, 4 a chunk (a chunk reads at most 16 records)
    assert all(status_of(t) == "cancelled" for t in matching)
    assert all(status_of(t) == "pending" for t in [*others, late])
    message = client.get(answer["Location"]).content.decode()
    assert "cancel: 10 done, 0 refused." in message


def test_a_filter_by_id_prefix_is_counted_from_the_index(resize, staff):
    tasks = [post(resize, now=T0 + i) for i in range(12)]
    prefix = tasks[0].id[:1]
    want = sum(1 for t in tasks if t.id.startswith(prefix))
    page = staff.post(BULK, {"do": "cancel:filter", "q": prefix}).content.decode()
    assert f"<strong data-count>{want}</strong>" in page


def test_a_filter_that_matches_nothing(resize, staff):
    post(resize)
    page = staff.post(BULK, {"do": "retry:filter", "status": "failed"}).content.decode()
    assert "Nothing matches now." in page and 'name="confirm"' not in page


def test_a_retry_by_filter_uses_the_queues_settings(resize, staff):
    store, settings = stores.of(HOST, NAME), resize.to_settings()
    failed = []
    for i in range(3):
        post(resize, now=T0 + i)
        [claimed] = store.claim(HOST, NAME, settings=settings, worker="w")
        failed.append(store.fail(HOST, NAME, claimed.id, settings=settings, worker="w",
                                 attempt=1).task)  # fmt: skip
    page = staff.post(BULK, {"do": "retry:filter", "status": "failed"}).content.decode()
    staff.post(BULK, dict_of(hidden_fields(page)))
    assert [status_of(t) for t in failed] == ["pending"] * 3


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"do": "explode:selected", "ids": "0123456789abcdef"}, "No such action: explode."),
        ({"do": "cancel:everything"}, "Choose the ticked tasks or every task"),
        ({"do": "cancel:selected", "ids": "../../etc"}, "Tick at least one task first."),
        ({"do": "cancel:filter", "confirm": "1"}, "Nothing was counted to act on"),
        (
            {"do": "cancel:filter", "confirm": "1", "until": f"{T0}.0.{'0' * 16}", "cutoff": "x"},
            "Nothing was counted to act on",
        ),
        ({"do": "cancel:filter", "q": "item.x like y"}, "after the field comes contains"),
    ],
)
def test_a_bulk_form_that_cannot_be_acted_on_says_why(resize, staff, form, message):
    task = post(resize)
    answer = staff.post(BULK, form, follow=True)
    assert message in html.unescape(answer.content.decode())
    assert status_of(task) == "pending"


def test_the_carried_tally_only_counts_what_it_reads(resize, staff):
    task = post(resize)
    answer = staff.post(BULK, {"do": "cancel:selected", "ids": task.id, "confirm": "1",
                               "done": "7", "refused": ["not_cancellable:2", "<b>:9", "x:y"]},
                        follow=True)  # fmt: skip
    assert "cancel: 8 done, 2 refused (2 not_cancellable)." in answer.content.decode()


def test_too_many_ticked_tasks_are_refused(resize, staff):
    ids = [f"{i:016x}" for i in range(501)]
    answer = staff.post(BULK, {"do": "cancel:selected", "ids": ids}, follow=True)
    assert "At most 500 ticked tasks at once." in answer.content.decode()


def test_the_settings_of_a_queue_without_an_attempt_budget(make_queue, staff):
    queue = make_queue(HOST, NAME, max_attempts=0, retain_from="fetched", max_pending=1000,
                       public_post=True)  # fmt: skip
    assert isinstance(queue.to_settings(), QueueSettings)
    page = page_of(staff)
    assert "no budget: a lapsed lease runs it again" in page and "after it is fetched" in page
    assert "<dd>1,000</dd>" in page and "<dd>allowed</dd>" in page


def test_the_preview_says_why_a_task_failed_or_waits():
    from queues.console.queue_page import PREVIEW_CHARS, preview
    from queues.store import State, Task

    def task(status: State, **fields) -> Task:
        return Task(id="0123456789abcdef", host=HOST, queue=NAME, status=status,
                    item={"url": "u" * 200}, posted_by=None, posted_at=1, updated_at=1,
                    **fields)  # fmt: skip

    assert preview(task(State.FAILED, error="attempts", result={"e": 1})) == (
        'attempts used up: {"e": 1}'  # a body without a reason field: its JSON
    )
    # Issue 36: the worker's failure body said as its reason's first line, not raw JSON, and
    # the store's "attempts" in words with the count.
    command = {"error": "the command exited with status 3: no such file: " + "a" * 60 + ".png",
               "type": "CommandFailed", "exitCode": 3, "stderr": "x\nno such file"}  # fmt: skip
    said = preview(task(State.FAILED, error="attempts", result=command, attempts=3,
                        max_attempts=3))  # fmt: skip
    assert said == "attempts used up (3 of 3): " + command["error"]  # whole: 135 characters
    assert preview(task(State.FAILED, error="timeout")) == "the queue timeout passed"
    assert preview(task(State.PENDING, last_error={"error": "boom\ntrace"})) == "last error: boom"
    long = preview(task(State.FINISHED, result=1))
    assert long.startswith('{"url":"uuu') and len(long) == PREVIEW_CHARS and long[-1] == "…"


def test_relative_times_read_as_people_say_them():
    from queues.templatetags.readable import ago, moment

    now = T0 + 86_400_000
    assert ago(now - 120_000, now) == "2 min ago" and ago(now - 2_000, now) == "just now"
    assert ago(now - 90_061_000, now) == "1 day ago" and ago(now + 300_000, now) == "in 5 min"
    assert moment(None, now) == "" and moment(0, now) == ""


def test_bulk_actions_on_a_queue_never_posted_to(resize, staff):
    page = staff.post(BULK, {"do": "cancel:filter", "status": "pending"}).content.decode()
    assert "Nothing matches now." in page
    answer = staff.post(BULK, {"do": "cancel:filter", "status": "pending", "confirm": "1",
                               "until": f"{T0}.0.0123456789abcdef", "cutoff": str(T0)},
                        follow=True)  # fmt: skip
    assert "cancel: 0 done, 0 refused." in answer.content.decode()


@pytest.mark.parametrize(
    "after", ["", "x", "12.short", f"{T0}.0123456789ABCDEF", f"{T0}.zz23456789abcdef", "1" * 17]
)
def test_a_cursor_that_cannot_be_read_starts_from_the_first_page(resize, staff, after):
    tasks = [post(resize, {"k": "v"}, now=T0 + i) for i in range(3)]
    page = page_of(staff, f"?q=item.k+%3D+v&after={after}")
    assert listed(page) == [t.id for t in reversed(tasks)]


def test_the_bulk_pages_have_the_layout_and_their_forms_a_csrf_token(resize, staff, monkeypatch):
    monkeypatch.setattr(bulk, "CHUNK", 1)
    for n in range(3):
        post(resize, now=T0 + n)
    confirm = staff.post(BULK, {"do": "cancel:filter", "status": "pending"}).content.decode()
    working = staff.post(BULK, dict_of(hidden_fields(confirm))).content.decode()
    assert "working through the tasks" in working and "1 done, 0 refused" in working
    for page in (confirm, working):
        assert '<a class="skip" href="#main">Skip to content</a>' in page
        forms = re.findall(r'<form[^>]*method="post"[^>]*>.*?</form>', page, re.S)
        assert len(forms) == 2  # log out, and the step's own
        assert all('name="csrfmiddlewaretoken"' in form for form in forms)


def test_a_requeue_and_a_delete_by_filter_name_the_operator_in_the_log(resize, store_dirs):
    from tasklogs.ingest import ingest_directory
    from tasklogs.models import TaskEvent

    store, settings = stores.of(HOST, NAME), resize.to_settings()
    for i in range(4):
        post(resize, now=T0 + i)
    running = store.claim(HOST, NAME, settings=settings, worker="w", max_tasks=2)
    [ended] = store.claim(HOST, NAME, settings=settings, worker="w")
    store.finish(HOST, NAME, ended.id, settings=settings, worker="w", attempt=1, result=None)
    client = client_for("olga", role="operator", queue=resize)
    for do, status in (("requeue:filter", "processing"), ("delete:filter", "finished")):
        page = client.post(BULK, {"do": do, "status": status}).content.decode()
        assert client.post(BULK, dict_of(hidden_fields(page))).status_code == 302
    assert [status_of(t) for t in running] == ["pending", "pending"]
    assert ended.id not in {t.id for t in store.list_tasks(HOST, NAME).tasks}
    ingest_directory(store_dirs["logs"] / "tasks")
    logged = TaskEvent.objects.filter(event__in=("requeued", "deleted")).values_list("event", "by")
    assert sorted(logged) == [("deleted", "olga"), ("requeued", "olga"), ("requeued", "olga")]


def test_a_carried_tally_in_other_digits_counts_nothing_never_a_500(resize, staff):
    task = post(resize)
    answer = staff.post(BULK, {"do": "cancel:selected", "ids": task.id, "confirm": "1",
                               "done": "\u00b2", "refused": ["not_cancellable:\u00b2"]},
                        follow=True)  # fmt: skip
    assert "cancel: 1 done, 0 refused." in answer.content.decode()


@pytest.mark.parametrize("page", ["\u00b2", "\u0663", "\uff12"])
def test_a_page_number_in_other_digits_is_page_one(resize, staff, page):
    tasks = [post(resize, now=T0 + i) for i in range(queue_page.PAGE_SIZE + 5)]
    assert listed(page_of(staff, f"?page={quote(page)}")) == listed(page_of(staff))
    assert tasks[-1].id in listed(page_of(staff, f"?page={quote(page)}"))


def test_a_cursor_in_other_digits_starts_from_the_first_page(resize, staff):
    tasks = [post(resize, {"k": "v"}, now=T0 + i) for i in range(3)]
    after = quote("\u00b2" * 3 + ".0123456789abcdef")
    page = page_of(staff, f"?q=item.k+%3D+v&after={after}")
    assert listed(page) == [t.id for t in reversed(tasks)]
