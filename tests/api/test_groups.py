"""Groups over HTTP: `group` and `onComplete` on a post (query) and a batch post (body), the
status view's `group`, `GET .../groups/{id}` under a task read's visibility, and the refusals:
a bad name 400 invalid_request, a closed group 409 group_closed, a callback queue the caller
may not post to 404 or 403."""

import json
from urllib.parse import quote

import pytest

from tests.api.conftest import HOST, OTHER_QUEUE, QUEUE, url

pytestmark = pytest.mark.django_db(transaction=False)
TASKS = url(HOST, QUEUE)
BATCH = url(HOST, QUEUE, "tasks/batch")
GROUP = url(HOST, QUEUE, "groups/nightly")


def _closing(item=None, queue=QUEUE):
    query = f"group=nightly&onCompleteQueue={queue}"
    return query if item is None else f"{query}&onComplete={quote(json.dumps(item))}"


def _finish(world, client, task_id):
    assert world.claim().id == task_id
    r = client.post(f"{TASKS}/{task_id}/result", {"worker": "box-1", "attempt": 1, "result": {}},
                    format="json")  # fmt: skip
    assert r.status_code == 200, r.json()


def test_a_group_calls_back_once_its_last_task_ended_and_its_progress_reads(world):
    alice, bob = world.client("alice"), world.client("bob")
    a = alice.post(f"{TASKS}?group=nightly", {"n": 1}, format="json").json()
    assert a["group"] == "nightly"
    r = alice.post(f"{TASKS}?{_closing({'report': 'all'})}", {"n": 2}, format="json")
    assert r.status_code == 201, r.json()
    b = r.json()
    progress = alice.get(GROUP).json()
    assert progress["state"] == "closed" and progress["posted"] == 2 and progress["running"] == 2
    assert progress["onCompleteQueue"] == QUEUE and progress["callback"] is None
    _finish(world, bob, a["id"])
    _finish(world, bob, b["id"])
    progress = alice.get(GROUP).json()
    assert progress["state"] == "called_back" and progress["counts"]["finished"] == 2
    callback = alice.get(f"{TASKS}/{progress['callback']['id']}").json()
    assert callback["status"] == "pending"
    claimed = world.claim()
    assert claimed.id == progress["callback"]["id"]
    assert claimed.item == {
        "report": "all",
        "group": {
            "id": "nightly",
            "queue": QUEUE,
            "total": 2,
            "counts": {"finished": 2, "failed": 0, "cancelled": 0, "gone": 0},
            "unfinished": [],
            "unfinishedCount": 0,
        },
    }


def test_a_batch_post_joins_and_closes_a_group(world):
    alice = world.client("alice")
    r = alice.post(
        BATCH,
        {"tasks": [{"item": {"n": 1}}, {"item": {"n": 2}}], "group": "nightly",
         "onComplete": {"queue": QUEUE, "item": {"k": 1}}},
        format="json",
    )  # fmt: skip
    assert r.status_code == 201, r.json()
    assert {t["group"] for t in r.json()["tasks"]} == {"nightly"}
    assert alice.get(GROUP).json()["posted"] == 2
    again = alice.post(f"{TASKS}?group=nightly", {"n": 3}, format="json")
    assert (again.status_code, again.json()["code"]) == (409, "group_closed")


def test_a_group_reads_as_its_tasks_do(world):
    world.client("alice").post(f"{TASKS}?group=nightly", {"n": 1}, format="json")
    assert world.client("olga").get(GROUP).status_code == 200  # the queue's operator
    missing = world.client("alice").get(url(HOST, QUEUE, "groups/nosuch"))
    for who in ("paula", "bob"):  # another producer; a worker
        r = world.client(who).get(GROUP)
        assert r.status_code == 404 and r.content == missing.content
    r = world.client("mallory").get(GROUP)  # no role on the queue
    assert r.status_code == 404
    posted = world.client("paula").post(f"{TASKS}?group=nightly", {"n": 2}, format="json")
    assert (posted.status_code, posted.json()["code"]) == (404, "not_found")


@pytest.mark.parametrize("group", ["Nightly", "a.b", "-x", "x" * 65, "%00"])
def test_a_bad_group_name_is_400_and_nothing_is_posted(world, group):
    world.store.create_queue(HOST, QUEUE)
    r = world.client("alice").post(f"{TASKS}?group={group}", {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")
    assert world.store.list_tasks(HOST, QUEUE).count == 0


@pytest.mark.parametrize(
    "query, status, code",
    [
        (f"onCompleteQueue={QUEUE}", 400, "invalid_request"),  # no group
        ("group=nightly&onComplete=%7B%7D", 400, "invalid_request"),  # no queue
        (f"group=nightly&onCompleteQueue={QUEUE}&onComplete=%5B1%5D", 400, "invalid_request"),
        (f"group=nightly&onCompleteQueue={QUEUE}&onComplete=nope", 400, "invalid_request"),
        ("group=nightly&onCompleteQueue=Bad%20Queue", 400, "invalid_request"),
        (f"group=nightly&onCompleteQueue={OTHER_QUEUE[1]}", 404, "not_found"),  # no role there
        ("group=nightly&onCompleteQueue=missing", 404, "not_found"),
    ],
)
def test_a_bad_on_complete_is_refused_and_nothing_is_posted(world, query, status, code):
    world.store.create_queue(HOST, QUEUE)
    r = world.client("alice").post(f"{TASKS}?{query}", {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (status, code), r.json()
    assert world.store.list_tasks(HOST, QUEUE).count == 0


def test_a_callback_queue_where_the_caller_only_works_is_403(world):
    # mallory works and produces on thumbs; bob only works on resize
    r = world.client("mallory").post(
        f"{url(*OTHER_QUEUE)}?group=g&onCompleteQueue={QUEUE}", {"n": 1}, format="json"
    )
    assert r.status_code == 404  # she holds no role on resize: it does not exist for her
    world.store.create_queue(HOST, QUEUE)
    r = world.client("bob").post(f"{TASKS}?group=g", {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")


@pytest.mark.parametrize("entry", ["count", "owner"])
def test_a_group_whose_count_or_owner_was_planted_answers_its_progress(world, entry):
    """A FIFO as its count, a symlink as its owner: the page answered 500 (issue 33)."""
    import os
    from pathlib import Path

    from queues import stores

    world.files_only("a FIFO or a symlink planted in a group's directory")
    alice = world.client("alice")
    assert alice.post(f"{TASKS}?group=nightly", {"n": 1}, format="json").status_code == 201
    items = Path(stores.router().config.items_dir)
    path = items / HOST / QUEUE / "groups" / "nightly" / entry
    path.unlink()
    if entry == "count":
        os.mkfifo(path)
    else:
        path.symlink_to(items / HOST / QUEUE / "groups" / "nightly" / "members")
    r = alice.get(GROUP)
    assert r.status_code == 200, r.content
    assert r.json()["state"] == "open"
    assert world.client("paula").get(GROUP).status_code == 404  # still alice's group
