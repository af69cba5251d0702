"""A report that claims the worker's next task: `next` on result, fail and batch finish."""

import threading
import time

import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
CLAIM, FINISH = url(HOST, QUEUE, "claim"), url(HOST, QUEUE, "finish")


def report(world, task_id: str, verb: str, **body):
    sent = {"worker": "box-1", "attempt": 1, **body}
    return world.client("bob").post(f"{url(HOST, QUEUE)}/{task_id}/{verb}", sent, format="json")


def test_a_result_with_next_answers_the_outcome_and_the_next_task(world):
    first, second = world.post(item={"n": 1}), world.post(item={"n": 2})
    world.claim()
    r = report(world, first.id, "result", result={"ok": 1}, next={"lease": 30})
    assert r.status_code == 200, r.json()
    answer = r.json()
    assert answer["id"] == first.id and answer["status"] == "finished"
    [claimed] = answer["next"]
    assert claimed["id"] == second.id and claimed["item"] == {"n": 2}
    assert claimed["status"] == "processing" and claimed["attempts"] == 1
    assert claimed["lease"]["worker"] == "box-1"
    assert claimed["lease"]["until"] - claimed["updatedAt"] == 30_000
    assert world.store.read(HOST, QUEUE, second.id).status == "processing"


def test_a_report_without_next_answers_as_before(world):
    task = world.post()
    world.post()
    world.claim()
    r = report(world, task.id, "result", result={"ok": 1})
    assert r.status_code == 200 and "next" not in r.json()


def test_next_with_nothing_pending_answers_an_empty_list(world):
    task = world.post()
    world.claim()
    r = report(world, task.id, "result", result={}, next={})
    assert r.status_code == 200 and r.json()["next"] == []
    assert world.store.read(HOST, QUEUE, task.id).status == "finished"


def test_a_failure_with_next_claims_up_to_max(world):
    task = world.post()
    others = {world.post().id for _ in range(3)}
    world.claim()
    r = report(world, task.id, "fail", retry=True, result={"e": 1}, next={"max": 2})
    assert r.status_code == 200 and r.json()["status"] == "pending"  # retried after the backoff
    claimed = r.json()["next"]
    assert len(claimed) == 2 and {t["id"] for t in claimed} <= others


def test_a_waiting_next_takes_a_task_posted_meanwhile(world):
    task = world.post()
    world.claim()
    settings = world.queues["own"].to_settings()  # the thread must not touch the test database
    late = {"late": True}
    later = threading.Timer(
        0.3, lambda: world.store.post(HOST, QUEUE, late, settings=settings, posted_by="alice")
    )
    later.start()
    started = time.monotonic()
    r = report(world, task.id, "result", result={}, next={"wait": 10})
    later.join()
    assert r.status_code == 200 and [t["item"] for t in r.json()["next"]] == [{"late": True}]
    assert time.monotonic() - started < 5


def test_a_replayed_report_still_claims_the_next(world):
    task = world.post()
    world.claim()
    report(world, task.id, "result", result={"ok": 1})
    waiting = world.post()
    r = report(world, task.id, "result", result={"ok": 1}, next={})
    assert r.status_code == 200 and r.headers["Taskhoster-Outcome-Replayed"] == "true"
    assert [t["id"] for t in r.json()["next"]] == [waiting.id]


def test_a_refused_report_claims_nothing(world):
    task = world.post()
    waiting = world.post()
    world.claim()
    r = report(world, task.id, "result", attempt=2, result={}, next={})
    assert (r.status_code, r.json()["code"]) == (409, "lease_lost")
    assert world.store.read(HOST, QUEUE, waiting.id).status == "pending"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ([1], "next must be"),
        ("max", "next must be"),
        ({"max": 0}, "next.max"),
        ({"max": 101}, "next.max"),
        ({"max": "2"}, "next.max"),
        ({"wait": 61}, "next.wait"),
        ({"wait": True}, "next.wait"),
        ({"lease": 0}, "next.lease"),
        ({"lease": 10**9}, "next.lease"),
        ({"worker": "x"}, "Unknown field worker in next"),
    ],
)
@pytest.mark.parametrize("verb", ["result", "fail"])
def test_a_bad_next_is_refused_and_nothing_is_reported(world, verb, spec, words):
    task = world.post()
    world.post()
    world.claim()
    before = world.written()
    r = report(world, task.id, verb, result={}, next=spec)
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")
    assert words in r.json()["detail"]
    assert world.written() == before


def test_a_batch_finish_with_next_claims_the_next_batch(world):
    for n in range(5):
        world.post(item={"n": n})
    claimed = world.client("bob").post(CLAIM, {"worker": "box-1", "max": 2}, format="json")
    outcomes = [{"id": t["id"], "attempt": 1, "outcome": "result", "result": {}}
                for t in claimed.json()["tasks"]]  # fmt: skip
    body = {"worker": "box-1", "outcomes": outcomes, "next": {"max": 2}}
    r = world.client("bob").post(FINISH, body, format="json")
    assert r.status_code == 200, r.json()
    assert [o["status"] for o in r.json()["outcomes"]] == [200, 200]
    assert sorted(t["item"]["n"] for t in r.json()["next"]) == [2, 3]
    assert all(t["lease"]["worker"] == "box-1" for t in r.json()["next"])


def test_a_batch_finish_with_a_bad_next_reports_nothing(world):
    task = world.post()
    world.claim()
    before = world.written()
    outcomes = [{"id": task.id, "attempt": 1, "outcome": "result", "result": {}}]
    body = {"worker": "box-1", "outcomes": outcomes, "next": {"max": 500}}
    r = world.client("bob").post(FINISH, body, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")
    assert world.written() == before
