"""Batch post (POST .../tasks/batch) and batch finish (POST .../finish) over HTTP, with every
refusal: the batch's own (empty, over 100, a bad entry naming its index, one key twice, one task
twice) and an entry's alone (a lapsed lease answers 409 in its slot, never the batch)."""

import pytest

from queues import stores
from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
BATCH = url(HOST, QUEUE, "tasks/batch")
FINISH = url(HOST, QUEUE, "finish")


def post_batch(world, tasks, who="alice"):
    return world.client(who).post(BATCH, {"tasks": tasks}, format="json")


def finish(world, outcomes, worker="box-1"):
    return world.client("bob").post(FINISH, {"worker": worker, "outcomes": outcomes}, format="json")


def test_a_batch_post_answers_each_status_view_in_order(world):
    r = post_batch(
        world,
        [
            {"item": {"n": 0}},
            {"item": {"n": 1}, "priority": 5, "delay": 10},
            {"item": {"n": 2}, "idempotencyKey": "k-2"},
        ],
    )
    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["replayed"] == []
    assert [t["status"] for t in body["tasks"]] == ["pending"] * 3
    assert body["tasks"][1]["priority"] == 5 and body["tasks"][1]["availableAt"] > 0
    assert "item" not in body["tasks"][0]  # the producer's status view, not the record
    for task in body["tasks"]:
        assert world.store.read(HOST, QUEUE, task["id"]).posted_by == "alice"
        assert [e["event"] for e in world.events(task["id"])] == ["posted"]
    again = post_batch(world, [{"item": {"n": 2}, "idempotencyKey": "k-2"}])
    assert again.status_code == 201
    assert again.json()["replayed"] == [0]
    assert again.json()["tasks"][0]["id"] == body["tasks"][2]["id"]


@pytest.mark.parametrize(
    ("tasks", "code", "index"),
    [
        ([{"item": {}}, {"item": {}}, {"item": {}}, {"item": [1]}], "invalid_item", 3),
        ([{"item": {}}, {"nope": {}}], "invalid_request", 1),
        ([{"item": {}}, {"item": {}, "extra": 1}], "invalid_request", 1),
        ([{"item": {}}, "not an object"], "invalid_request", 1),
        ([{"item": {}, "priority": 101}], "invalid_request", 0),
        ([{"item": {}}, {"item": {}, "delay": "5"}], "invalid_request", 1),
        ([{"item": {}}, {"item": {}, "idempotencyKey": 7}], "invalid_request", 1),
        (
            [{"item": {"a": 1}, "idempotencyKey": "k"}, {"item": {"a": 1}, "idempotencyKey": "k"}],
            "invalid_request",
            1,
        ),
    ],
)
def test_one_bad_entry_refuses_the_batch_by_its_index_and_writes_nothing(world, tasks, code, index):
    stores.of(HOST, QUEUE).create_queue(HOST, QUEUE)
    before = world.written()
    r = post_batch(world, tasks)
    assert r.status_code == 400
    assert r.json()["code"] == code and r.json()["index"] == index, r.json()
    assert world.written() == before


def test_an_oversized_item_is_413_naming_its_entry(world, make_queue):
    make_queue(HOST, QUEUE, max_item_bytes=100)
    r = post_batch(world, [{"item": {}}, {"item": {"x": "y" * 200}}])
    assert r.status_code == 413 and r.json()["index"] == 1


def test_a_key_used_with_another_item_is_422_naming_its_entry(world):
    world.post(item={"a": 1}, idempotency_key="k1")
    r = post_batch(world, [{"item": {"b": 1}}, {"item": {"a": 2}, "idempotencyKey": "k1"}])
    assert r.status_code == 422
    assert r.json()["code"] == "idempotency_key_reused" and r.json()["index"] == 1


def test_a_batch_past_max_pending_is_429_and_writes_nothing(world, make_queue):
    make_queue(HOST, QUEUE, max_pending=2)
    stores.of(HOST, QUEUE).create_queue(HOST, QUEUE)
    before = world.written()
    r = post_batch(world, [{"item": {}}] * 3)
    assert r.status_code == 429 and r.json()["code"] == "queue_full" and r["Retry-After"]
    assert world.written() == before


@pytest.mark.parametrize("tasks", [[], [{"item": {}}] * 101, None, {"item": {}}])
def test_an_empty_missing_or_oversized_batch_is_refused(world, tasks):
    body = {} if tasks is None else {"tasks": tasks}
    r = world.client("alice").post(BATCH, body, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    assert "index" not in r.json()


def test_a_batch_post_needs_the_producer_role(world):
    r = post_batch(world, [{"item": {}}], who="bob")
    assert r.status_code == 403 and r.json()["code"] == "permission_denied"
    r = world.client("anonymous").post(BATCH, {"tasks": [{"item": {}}]}, format="json")
    assert r.status_code == 401


def test_a_public_queue_takes_a_batch_without_a_token(world, make_queue):
    make_queue(HOST, QUEUE, public_post=True)
    r = world.client("anonymous").post(BATCH, {"tasks": [{"item": {}}]}, format="json")
    assert r.status_code == 201
    assert world.store.read(HOST, QUEUE, r.json()["tasks"][0]["id"]).posted_by is None


# -- batch finish ------------------------------------------------------------------------------


def claim_many(world, n):
    post_batch(world, [{"item": {"n": i}} for i in range(n)])
    r = world.client("bob").post(
        url(HOST, QUEUE, "claim"), {"worker": "box-1", "max": n}, format="json"
    )
    return r.json()["tasks"]


def test_a_batch_finish_answers_each_entry(world):
    tasks = claim_many(world, 3)
    r = finish(
        world,
        [
            {"id": tasks[0]["id"], "attempt": 1, "outcome": "result", "result": {"ok": 1}},
            {"id": tasks[1]["id"], "attempt": 1, "outcome": "fail", "result": {"e": 1}},
            {"id": tasks[2]["id"], "attempt": 1, "outcome": "retry"},
        ],
    )
    assert r.status_code == 200, r.json()
    answers = r.json()["outcomes"]
    assert [a["status"] for a in answers] == [200, 200, 200]
    assert [a["task"]["status"] for a in answers] == ["finished", "failed", "pending"]
    assert answers[0]["task"]["result"] == {"ok": 1} and answers[0]["replayed"] is False


def test_a_lapsed_lease_answers_409_in_its_slot_and_the_others_finish(world, make_queue):
    queue = make_queue(HOST, QUEUE, lease_seconds=1)
    tasks = claim_many(world, 2)
    stores.of(HOST, QUEUE).sweep_queue(
        HOST, QUEUE, queue.to_settings(), now=tasks[0]["lease"]["until"] + 1
    )
    again = (
        world.client("bob")
        .post(url(HOST, QUEUE, "claim"), {"worker": "box-1", "max": 1}, format="json")
        .json()["tasks"][0]
    )
    lapsed = next(t for t in tasks if t["id"] != again["id"])
    r = finish(
        world,
        [
            {"id": lapsed["id"], "attempt": 1, "outcome": "result", "result": {}},
            {"id": again["id"], "attempt": 2, "outcome": "result", "result": {}},
        ],
    )
    assert r.status_code == 200
    refused, done = r.json()["outcomes"]
    assert refused["status"] == 409 and refused["code"] == "lease_lost" and refused["index"] == 0
    assert done["status"] == 200 and done["task"]["status"] == "finished"
    assert world.store.read(HOST, QUEUE, lapsed["id"]).status.value == "pending"


def test_unknown_tasks_and_oversized_results_are_refused_in_their_slots(world, make_queue):
    make_queue(HOST, QUEUE, max_item_bytes=100)
    tasks = claim_many(world, 1)
    r = finish(
        world,
        [
            {"id": "0123456789abcdef", "attempt": 1, "outcome": "result", "result": {}},
            {"id": tasks[0]["id"], "attempt": 1, "outcome": "result", "result": {"x": "y" * 200}},
        ],
    )
    assert r.status_code == 200
    missing, big = r.json()["outcomes"]
    assert missing["status"] == 404 and missing["code"] == "not_found"
    assert big["status"] == 413 and big["code"] == "payload_too_large"


@pytest.mark.parametrize(
    ("outcomes", "index"),
    [
        ([], None),
        ([{"id": "0123456789abcdef", "attempt": 1, "outcome": "fail"}] * 101, None),
        ([{"id": "0123456789abcdef", "attempt": 1, "outcome": "finish"}], 0),
        ([{"id": "0123456789abcdef", "attempt": "1", "outcome": "fail"}], 0),
        ([{"id": "0123456789abcdef", "attempt": 1, "outcome": "fail"}, {"attempt": 1}], 1),
        ([{"id": "0123456789abcdef", "attempt": 1, "outcome": "result"}], 0),  # no result
        (
            [
                {"id": "0123456789abcdef", "attempt": 1, "outcome": "fail"},
                {"id": "0123456789abcdef", "attempt": 1, "outcome": "fail"},
            ],
            1,
        ),
    ],
)
def test_a_malformed_finish_batch_is_refused_whole(world, outcomes, index):
    r = finish(world, outcomes)
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.json()
    assert r.json().get("index") == index


def test_a_batch_finish_needs_the_worker_role_and_a_worker(world):
    r = world.client("alice").post(
        FINISH,
        {"worker": "w", "outcomes": [{"id": "0" * 16, "attempt": 1, "outcome": "fail"}]},
        format="json",
    )
    assert r.status_code == 403
    r = world.client("bob").post(FINISH, {"outcomes": []}, format="json")
    assert r.status_code == 400 and "worker" in r.json()["detail"]
