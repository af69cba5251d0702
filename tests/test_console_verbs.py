"""The operator's verbs in the console: requeue, retry now (hasten), delete, edit-and-retry,
re-post (from the task page and from Task Logs), each with the permission matrix (staff, the
queue's operator, anyone else: 404 and nothing changed), CSRF, the operator's name on the event
line, and every refusal."""

from __future__ import annotations

import time
from dataclasses import replace

import orjson
import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues import stores
from queues.store import NotFound
from tasklogs.ingest import ingest_directory
from tasklogs.models import TaskEvent
from tests.test_console import client_for

pytestmark = pytest.mark.django_db
HOST = "task.example.com"
BASE = f"/console/{HOST}/resize"


@pytest.fixture
def resize(make_queue):
    return make_queue(
        HOST,
        "resize",
        archive_payloads=True,
        max_attempts=3,
        item_schema={"type": "object", "required": ["url"]},
        max_item_bytes=200,
    )


@pytest.fixture
def people(resize):
    return {
        "staff": client_for("sam", is_staff=True),
        "operator": client_for("olga", role="operator", queue=resize),
        "producer": client_for("pat", role="producer", queue=resize),
        "stranger": client_for("stan"),
    }


def _post(queue, item=None):
    return stores.of(HOST, "resize").post(HOST, "resize", item or {"url": "http://a"},
                            settings=queue.to_settings(), posted_by="alice").task  # fmt: skip


def _waiting(queue):
    """A task whose first attempt failed with retry: pending, its backoff still to run."""
    task = _post(queue)
    store, settings = stores.of(HOST, "resize"), queue.to_settings()
    store.claim(HOST, "resize", settings=settings, worker="box-1")
    store.fail(HOST, "resize", task.id, settings=replace(settings, backoff_seconds=3600),
               worker="box-1", attempt=1, result={"why": "busy"}, retry=True)  # fmt: skip
    return task


def _running(queue):
    task = _post(queue)
    stores.of(HOST, "resize").claim(HOST, "resize", settings=queue.to_settings(), worker="box-1")
    return task


def _failed(queue, item=None):
    task = _post(queue, item)
    store, settings = stores.of(HOST, "resize"), queue.to_settings()
    store.claim(HOST, "resize", settings=settings, worker="box-1")
    store.fail(HOST, "resize", task.id, settings=settings, worker="box-1", attempt=1,
               result={"why": "404"})  # fmt: skip
    return task


def _status(task_id: str) -> str | None:
    try:
        return stores.of(HOST, "resize").read(HOST, "resize", task_id).status.value
    except NotFound:
        return None


def _lines(store_dirs, task_id: str) -> list[dict]:
    return [
        line
        for day in sorted((store_dirs["logs"] / "tasks").glob("*.jsonl"))
        for raw in day.read_bytes().splitlines()
        if (line := orjson.loads(raw))["id"] == task_id
    ]


# -- the permission matrix: who may act ------------------------------------------------------

ACTIONS = {
    "requeue": (_running, "processing", "pending"),
    "hasten": (_waiting, "pending", "pending"),
    "delete": (_failed, "failed", None),
    "edit-retry": (_failed, "failed", "pending"),
    "repost": (_failed, "failed", "failed"),  # the old task stays; a new one is posted
}


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("who", ["staff", "operator", "producer", "stranger"])
def test_who_may_act(resize, people, store_dirs, who, action):
    make, before, after = ACTIONS[action]
    task = make(resize)
    data = {"item": '{"url": "http://b"}'} if action == "edit-retry" else {}
    response = people[who].post(f"{BASE}/{task.id}/{action}", data)
    if who in ("producer", "stranger"):
        assert response.status_code == 404
        assert _status(task.id) == before
        assert not any("by" in line for line in _lines(store_dirs, task.id))
        assert len(stores.of(HOST, "resize").list_tasks(HOST, "resize").tasks) == 1
        return
    assert response.status_code == 302
    assert _status(task.id) == after
    name = {"staff": "sam", "operator": "olga"}[who]
    if action == "repost":
        [new] = [
            t for t in stores.of(HOST, "resize").list_tasks(HOST, "resize").tasks if t.id != task.id
        ]
        assert response["Location"] == f"{BASE}/{new.id}/"
        assert (_lines(store_dirs, new.id)[0]["by"], new.reposted_from) == (name, task.id)
    else:
        assert _lines(store_dirs, task.id)[-1]["by"] == name


@pytest.mark.parametrize("action", ["requeue", "hasten", "delete", "edit-retry", "repost"])
def test_the_verbs_need_post_and_a_csrf_token(resize, action):
    task = _failed(resize)
    user = User.objects.create_user("olga", password="pw", is_staff=True)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    url = f"{BASE}/{task.id}/{action}"
    assert client.get(url).status_code == 405
    assert client.post(url, {"item": "{}"}).status_code == 403
    assert (
        _status(task.id) == "failed"
        and len(stores.of(HOST, "resize").list_tasks(HOST, "resize").tasks) == 1
    )


# -- what each does, and each refusal ---------------------------------------------------------


def test_cancel_and_retry_from_the_console_name_the_operator(resize, people, store_dirs):
    task = _post(resize)
    people["operator"].post(f"{BASE}/{task.id}/cancel")
    people["staff"].post(f"{BASE}/{task.id}/retry")
    cancelled, retried = _lines(store_dirs, task.id)[-2:]
    assert (cancelled["event"], cancelled["by"]) == ("cancelled", "olga")
    assert (retried["event"], retried["by"]) == ("retried", "sam")


@pytest.mark.parametrize(
    ("make", "action", "code"),
    [
        (_post, "requeue", "not_requeueable"),
        (_post, "hasten", "not_waiting"),
        (_running, "hasten", "not_waiting"),
        (_running, "delete", "not_deletable"),
        (_post, "edit-retry", "not_retryable"),
    ],
)
def test_a_refused_verb_says_why_and_changes_nothing(resize, people, make, action, code):
    task = make(resize)
    before = _status(task.id)
    response = people["operator"].post(f"{BASE}/{task.id}/{action}", {"item": '{"url": "x"}'},
                                       follow=True)  # fmt: skip
    assert code in response.content.decode()
    assert _status(task.id) == before


def test_delete_goes_back_to_the_queue_and_the_task_is_gone(resize, people):
    task = _failed(resize)
    response = people["operator"].post(f"{BASE}/{task.id}/delete")
    assert response["Location"] == f"{BASE}/"
    assert _status(task.id) is None
    assert people["operator"].get(f"{BASE}/{task.id}/").status_code == 404


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("{not json", "The item is not JSON"),
        ('["a list"]', "invalid_item"),
        ('{"no_url": 1}', "invalid_item"),
        ('{"url": "' + "x" * 300 + '"}', "payload_too_large"),
    ],
)
def test_a_refused_edit_shows_the_page_again_with_the_text_kept(resize, people, text, shown):
    task = _failed(resize)
    response = people["operator"].post(f"{BASE}/{task.id}/edit-retry", {"item": text})
    page = response.content.decode()
    assert response.status_code == 400 and shown in page
    assert 'role="alert"' in page and '<details class="edit-item" open>' in page
    assert _escaped(text)[:60] in page
    assert _status(task.id) == "failed"
    assert stores.of(HOST, "resize").read(HOST, "resize", task.id).item == {"url": "http://a"}


def _escaped(text: str) -> str:
    from django.utils.html import escape

    return escape(text)


def test_an_edit_replaces_the_item_and_the_event_says_edited(resize, people, store_dirs):
    task = _failed(resize, {"url": "htp://typo"})
    response = people["operator"].post(f"{BASE}/{task.id}/edit-retry",
                                       {"item": '{"url": "http://fixed"}'})  # fmt: skip
    assert response["Location"] == f"{BASE}/{task.id}/"
    assert stores.of(HOST, "resize").read(HOST, "resize", task.id).item == {"url": "http://fixed"}
    line = _lines(store_dirs, task.id)[-1]
    assert (line["event"], line["by"], line["edited"]) == ("retried", "olga", True)


def test_a_repost_without_an_archive_is_refused_and_posts_nothing(make_queue, store_dirs):
    plain = make_queue(HOST, "plain")  # archives nothing
    client = client_for("olga", role="operator", queue=plain)
    task = stores.of(HOST, "plain").post(HOST, "plain", {"n": 1}, settings=plain.to_settings(),
                            posted_by="alice").task  # fmt: skip
    stores.of(HOST, "plain").cancel(HOST, "plain", task.id, settings=plain.to_settings())
    response = client.post(f"/console/{HOST}/plain/{task.id}/repost", follow=True)
    assert "not_archived" in response.content.decode()
    assert len(stores.of(HOST, "plain").list_tasks(HOST, "plain").tasks) == 1


# -- the task page -----------------------------------------------------------------------------


def _forms(page: str) -> set[str]:
    verbs = ("cancel", "requeue", "hasten", "retry", "delete", "edit-retry", "repost")
    return {verb for verb in verbs if f'/{verb}"' in page}


def test_the_task_page_offers_only_what_the_state_allows(resize, people):
    client = people["operator"]
    pending = _post(resize)
    assert _forms(client.get(f"{BASE}/{pending.id}/").content.decode()) == {"cancel"}
    stores.of(HOST, "resize").claim(HOST, "resize", settings=resize.to_settings(), worker="box-1")
    running_page = client.get(f"{BASE}/{pending.id}/").content.decode()
    assert _forms(running_page) == {"cancel", "requeue"}
    assert (
        'held by <span class="mono">box-1</span>' in running_page
        and " left</strong>" in running_page
    )
    waiting = _waiting(resize)
    assert _forms(client.get(f"{BASE}/{waiting.id}/").content.decode()) == {"cancel", "hasten"}
    failed = _failed(resize)
    assert _forms(client.get(f"{BASE}/{failed.id}/").content.decode()) == {
        "retry", "delete", "edit-retry", "repost",
    }  # fmt: skip


def test_the_task_page_shows_attempts_a_lapsed_lease_and_who_acted(resize, people, store_dirs):
    store, settings = stores.of(HOST, "resize"), resize.to_settings()
    start = time.time_ns() // 1_000_000 - 10 * 60_000  # the events' order is their times'
    task = store.post(HOST, "resize", {"url": "u"}, settings=settings, posted_by="alice",
                      now=start).task  # fmt: skip
    [claimed] = store.claim(HOST, "resize", settings=settings, worker="box-1", now=start + 1)
    # the lease lapses: the sweep requeues it; the next claim is ended by an operator
    store.sweep_queue(HOST, "resize", settings, now=claimed.lease.until + 1)
    store.claim(HOST, "resize", settings=settings, worker="box-2", now=claimed.lease.until + 2)
    people["operator"].post(f"{BASE}/{task.id}/requeue")
    ingest_directory(store_dirs["logs"] / "tasks")
    page = people["operator"].get(f"{BASE}/{task.id}/").content.decode()
    assert "1 lease lapsed" in page
    assert page.count('<span class="tag bad">lease lapsed</span>') == 1
    assert ">box-1</td>" in page and ">box-2</td>" in page
    assert "requeued</span> by olga" in page
    assert "requeued by olga" in page  # the operator actions list
    assert f'href="/logs/{HOST}/resize/{task.id}/"' in page


def test_the_task_pages_payload_links_open_in_a_new_tab(resize, people, store_dirs):
    task = _failed(resize)
    ingest_directory(store_dirs["logs"] / "tasks")
    page = people["operator"].get(f"{BASE}/{task.id}/").content.decode()
    assert (f'<a href="/logs/{HOST}/resize/{task.id}/payloads/item/view" target="_blank" '
            'rel="noopener">item</a>') in page  # fmt: skip
    assert "/payloads/result/1/failed/view" in page


def test_user_strings_on_the_task_page_are_escaped(resize, people):
    task = _failed(resize, {"url": "<script>alert(1)</script>"})
    page = people["operator"].get(f"{BASE}/{task.id}/").content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page


# -- Task Logs: the "by" column, and a re-post of a task the store cleaned ----------------------


def _cleaned(resize):
    task = _failed(resize)
    store = stores.of(HOST, "resize")
    store.delete(HOST, "resize", task.id, by="olga")
    return task


def test_task_logs_show_who_did_it(resize, people, store_dirs):
    task = _cleaned(resize)
    ingest_directory(store_dirs["logs"] / "tasks")
    assert TaskEvent.objects.get(task_id=task.id, event="deleted").by == "olga"
    listing = people["operator"].get("/logs/").content.decode()
    assert '<th title="The operator whose action it was">by</th>' in listing
    assert '<td data-label="by">olga</td>' in listing  # the label its card shows on a phone
    timeline = people["operator"].get(f"/logs/{HOST}/resize/{task.id}/").content.decode()
    assert '<td data-label="by">olga</td>' in timeline


def test_a_cleaned_task_is_reposted_from_its_task_logs_page(resize, people, store_dirs):
    old = _cleaned(resize)
    ingest_directory(store_dirs["logs"] / "tasks")
    client = people["operator"]
    timeline = client.get(f"/logs/{HOST}/resize/{old.id}/").content.decode()
    assert f'action="{BASE}/{old.id}/repost"' in timeline
    response = client.post(f"{BASE}/{old.id}/repost")
    [new] = stores.of(HOST, "resize").list_tasks(HOST, "resize").tasks
    assert response["Location"] == f"{BASE}/{new.id}/"
    assert (new.item, new.reposted_from, new.posted_by) == ({"url": "http://a"}, old.id, "olga")
    ingest_directory(store_dirs["logs"] / "tasks")
    page = client.get(f"{BASE}/{new.id}/").content.decode()
    assert f're-post of <a class="mono" href="/logs/{HOST}/resize/{old.id}/">' in page
    new_timeline = client.get(f"/logs/{HOST}/resize/{new.id}/").content.decode()
    assert f're-post of <a class="mono" href="/logs/{HOST}/resize/{old.id}/">' in new_timeline


def test_task_logs_offer_no_repost_without_an_archive_or_to_others(resize, people, store_dirs):
    running = _running(resize)
    old = _cleaned(resize)
    (store_dirs["logs"] / "tasks-payloads" / HOST / "resize" / old.id / "item.json").unlink()
    ingest_directory(store_dirs["logs"] / "tasks")
    client = people["operator"]
    assert "/repost" not in client.get(f"/logs/{HOST}/resize/{old.id}/").content.decode()
    assert "/repost" not in client.get(f"/logs/{HOST}/resize/{running.id}/").content.decode()
    assert people["stranger"].get(f"/logs/{HOST}/resize/{old.id}/").status_code == 404
    response = client.post(f"{BASE}/{old.id}/repost")
    assert response["Location"] == f"/logs/{HOST}/resize/{old.id}/"
    assert [t.id for t in stores.of(HOST, "resize").list_tasks(HOST, "resize").tasks] == [
        running.id
    ]


def test_a_running_tasks_page_says_who_asked_it_to_stop(resize, people):
    task = _running(resize)
    people["operator"].post(f"{BASE}/{task.id}/cancel")
    page = people["operator"].get(f"{BASE}/{task.id}/").content.decode()
    assert "requested by olga; the worker is told on its next call" in page
    assert _forms(page) == {"requeue"}  # asked once; requeue ends it as a lapsed lease would


def test_retry_now_makes_a_task_in_its_backoff_claimable_at_once(resize, people, store_dirs):
    task = _waiting(resize)
    store, settings = stores.of(HOST, "resize"), resize.to_settings()
    assert store.claim(HOST, "resize", settings=settings, worker="box-2") == []
    page = people["operator"].post(f"{BASE}/{task.id}/hasten", follow=True).content.decode()
    assert f"Task {task.id}: hasten done, now pending." in page
    assert _lines(store_dirs, task.id)[-1]["event"] == "hastened"
    [again] = store.claim(HOST, "resize", settings=settings, worker="box-2")
    assert (again.id, again.attempts) == (task.id, 2)
