"""Dependencies over HTTP: `after` on a post (query) and on a batch entry, the status view's
`after` and `waitingFor`, and the refusals: a task the caller may not read is 404 as a read
of it would be, a malformed id 400."""

import pytest

from tests.api.conftest import HOST, OTHER_QUEUE, QUEUE, url

pytestmark = pytest.mark.django_db(transaction=False)
TASKS = url(HOST, QUEUE)
BATCH = url(HOST, QUEUE, "tasks/batch")


def test_a_post_after_a_task_waits_for_it_and_says_so(world):
    alice = world.client("alice")
    a = alice.post(TASKS, {"n": "a"}, format="json").json()
    r = alice.post(f"{TASKS}?after={a['id']}", {"n": "b"}, format="json")
    assert r.status_code == 201
    b = r.json()
    assert b["after"] == b["waitingFor"] == [f"{QUEUE}/{a['id']}"]
    assert world.claim().id == a["id"]
    assert world.store.claim(HOST, QUEUE, settings=world.queues["own"].to_settings(),
                             worker="box-1") == []  # fmt: skip
    worker = world.client("bob")
    done = worker.post(
        f"{TASKS}/{a['id']}/result", {"worker": "box-1", "attempt": 1, "result": {}}, format="json"
    )
    assert done.status_code == 200, done.json()
    released = alice.get(f"{TASKS}/{b['id']}").json()
    assert "waitingFor" not in released and released["releasedAt"] >= released["postedAt"]
    assert "released" in [e["event"] for e in world.events(b["id"])]


@pytest.mark.parametrize(
    "after",
    [
        "0123456789abcdef",  # no such task
        "thumbs/0123456789abcdef",  # no such task in a queue the caller has no role on
    ],
)
def test_an_unknown_dependency_is_404_and_nothing_is_posted(world, after):
    world.store.create_queue(HOST, QUEUE)
    r = world.client("alice").post(f"{TASKS}?after={after}", {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    assert world.store.list_tasks(HOST, QUEUE).count == 0


def test_a_task_the_caller_may_not_read_is_404_as_a_read_would_be(world):
    paulas = world.post(by="paula")
    others = world.post(OTHER_QUEUE, by="mallory")
    alice = world.client("alice")
    for after in (paulas.id, f"{OTHER_QUEUE[1]}/{others.id}"):
        read = alice.get(url(HOST, after.partition("/")[0] if "/" in after else QUEUE) + "/"
                         + after.rpartition("/")[2])  # fmt: skip
        r = alice.post(f"{TASKS}?after={after}", {"n": 1}, format="json")
        assert read.status_code == r.status_code == 404
        assert r.json()["code"] == "not_found"
    assert world.store.list_tasks(HOST, QUEUE).count == 1  # paula's alone


@pytest.mark.parametrize(
    "query",
    ["after=xyz", "after=Bad%20Queue/0123456789abcdef", "after=&onDependencyFailure=cancel"],
)
def test_a_malformed_after_is_400(world, query):
    r = world.client("alice").post(f"{TASKS}?{query}", {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_a_batch_entry_waits_and_a_bad_one_is_refused_by_its_index(world):
    alice = world.client("alice")
    a = world.post()
    r = alice.post(
        BATCH,
        {"tasks": [{"item": {"n": 1}}, {"item": {"n": 2}, "after": [a.id],
                                        "onDependencyFailure": "cancel"}]},
        format="json",
    )  # fmt: skip
    assert r.status_code == 201, r.json()
    second = r.json()["tasks"][1]
    assert second["waitingFor"] == [f"{QUEUE}/{a.id}"] and second["onDependencyFailure"] == "cancel"
    for entry, status, code in (
        ({"item": {"n": 3}, "after": ["0123456789abcdef"]}, 404, "not_found"),
        ({"item": {"n": 3}, "after": "nope"}, 400, "invalid_request"),
        ({"item": {"n": 3}, "after": [a.id], "onDependencyFailure": "ignore"}, 400,
         "invalid_request"),
    ):  # fmt: skip
        r = alice.post(BATCH, {"tasks": [{"item": {"n": 0}}, entry]}, format="json")
        assert (r.status_code, r.json()["code"], r.json().get("index")) == (status, code, 1)
    assert world.store.list_tasks(HOST, QUEUE).count == 3


def test_a_retry_waits_again_and_is_refused_while_what_it_runs_after_failed(world):
    alice, worker = world.client("alice"), world.client("bob")
    a = alice.post(TASKS, {"n": "a"}, format="json").json()
    b = alice.post(f"{TASKS}?after={a['id']}", {"n": "b"}, format="json").json()
    assert world.claim().id == a["id"]
    failed = worker.post(f"{TASKS}/{a['id']}/fail", {"worker": "box-1", "attempt": 1},
                         format="json")  # fmt: skip
    assert failed.status_code == 200, failed.json()
    assert alice.get(f"{TASKS}/{b['id']}").json()["error"] == "dependency_failed"
    refused = alice.post(f"{TASKS}/{b['id']}/retry")
    assert (refused.status_code, refused.json()["code"]) == (409, "dependency_failed")
    assert f"{QUEUE}/{a['id']}" in refused.json()["detail"]
    assert alice.get(f"{TASKS}/{b['id']}").json()["status"] == "failed"
    assert alice.post(f"{TASKS}/{a['id']}/retry").status_code == 200
    retried = alice.post(f"{TASKS}/{b['id']}/retry")
    assert retried.status_code == 200, retried.json()
    assert retried.json()["waitingFor"] == [f"{QUEUE}/{a['id']}"]
    assert world.claim().id == a["id"]  # b waits: a runs first
