"""Workers' endpoints: claim, progress, result, fail, and fencing by worker and attempt."""

import errno
import threading
import time

import pytest

from queues import stores
from queues.store import files
from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
CLAIM = url(HOST, QUEUE, "claim")


def task_url(task_id: str, rest: str) -> str:
    return f"{url(HOST, QUEUE)}/{task_id}/{rest}"


def claim(world, **body):
    return world.client("bob").post(CLAIM, {"worker": "box-1", **body}, format="json")


def test_claim_answers_the_full_record(world):
    task = world.post(item={"url": "a.png"})
    r = claim(world)
    assert r.status_code == 200
    record = r.json()
    assert record["id"] == task.id and record["item"] == {"url": "a.png"}
    assert record["status"] == "processing" and record["attempts"] == 1
    assert record["lease"]["worker"] == "box-1"
    assert record["lease"]["until"] - record["updatedAt"] == 60_000  # the queue's leaseSeconds
    assert record["postedBy"] == "alice"


def test_claim_with_nothing_to_claim_is_204(world):
    r = claim(world)
    assert r.status_code == 204 and r.content == b""


def test_a_claim_out_of_file_descriptors_is_503_and_the_task_stays(world):
    """EMFILE while the claim writes its record: storage_unavailable, never a 500, and the
    task is claimable again once descriptors are free (the store's fault injection)."""
    world.files_only("the fault is injected into the file store's system calls; a PostgreSQL "
                     "queue's claim opens no file")  # fmt: skip
    task = world.post()
    files.FAULTS.reset()
    files.FAULTS.fail_kind, files.FAULTS.fail_at, files.FAULTS.fail_errno = "open", 1, errno.EMFILE
    try:
        r = claim(world)
    finally:
        files.FAULTS.reset()
    assert (r.status_code, r.json()["code"]) == (503, "storage_unavailable")
    assert claim(world).json()["id"] == task.id


def test_claim_with_a_lease(world):
    world.post()
    record = claim(world, lease=5).json()
    assert record["lease"]["until"] - record["updatedAt"] == 5_000


def test_claim_many_answers_a_list(world):
    for i in range(3):
        world.post(now=1_000 + i)
    r = claim(world, max=2)
    assert r.status_code == 200 and len(r.json()["tasks"]) == 2
    assert len(claim(world, max=5).json()["tasks"]) == 1
    assert claim(world, max=5).status_code == 204


def test_claim_on_a_paused_queue_gets_nothing_and_says_it_is_paused(world):
    world.post()
    assert "Queue-Paused" not in claim(world, max=1, lease=1)  # took the task: not paused
    world.post()
    world.queues["own"].paused = True
    world.queues["own"].save()
    r = claim(world)
    assert (r.status_code, r.content, r["Queue-Paused"]) == (204, b"", "true")
    world.queues["own"].paused = False
    world.queues["own"].save()
    assert claim(world).status_code == 200
    r = claim(world)
    assert r.status_code == 204 and "Queue-Paused" not in r  # empty, not paused


def test_the_queues_stats_say_whether_it_is_paused(world):
    world.post()
    world.post(delay_seconds=60)
    world.claim()
    stats = url(HOST, QUEUE, "stats")
    r = world.client("bob").get(stats)
    assert r.status_code == 200
    assert r.json() == {"host": HOST, "queue": QUEUE, "paused": False, "pending": 1,
                        "processing": 1, "done": 0, "delayed": 1, "retrying": 0,
                        "oldestPendingAgeMs": r.json()["oldestPendingAgeMs"]}  # fmt: skip
    world.queues["own"].paused = True
    world.queues["own"].save()
    for who in ("alice", "bob", "olga"):  # any role on the queue may read its counts
        assert world.client(who).get(stats).json()["paused"] is True
    assert world.client("mallory").get(stats).status_code == 404  # no role: no such queue
    assert world.client("anonymous").get(stats).status_code == 401


def test_a_queue_nobody_posted_to_has_zero_stats(world):
    r = world.client("olga").get(url(HOST, QUEUE, "stats"))
    assert (r.status_code, r.json()["pending"], r.json()["done"]) == (200, 0, 0)


def test_waiting_claim_wakes_when_a_task_is_posted(world):
    settings = world.queues["own"].to_settings()  # the thread must not touch the test database
    poster = threading.Timer(
        0.3,
        lambda: world.store.post(HOST, QUEUE, {"n": 1}, settings=settings, posted_by="alice"),
    )
    poster.start()
    started = time.monotonic()
    r = claim(world, wait=20)
    poster.join()
    assert r.status_code == 200
    assert time.monotonic() - started < 10


def test_waiting_claim_ends_with_204(world):
    started = time.monotonic()
    assert claim(world, wait=0.3).status_code == 204
    assert time.monotonic() - started >= 0.25


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"worker": ""},
        {"worker": "x" * 201},
        {"worker": 7},
        {"worker": "w", "wait": 61},
        {"worker": "w", "wait": -1},
        {"worker": "w", "wait": "5"},
        {"worker": "w", "wait": True},
        {"worker": "w", "lease": 0},
        {"worker": "w", "lease": 86401},
        {"worker": "w", "lease": 1.5},
        {"worker": "w", "max": 0},
        {"worker": "w", "max": 101},
        {"worker": "w", "max": "2"},
    ],
)
def test_claim_refuses_bad_fields(world, body):
    world.post()
    r = world.client("bob").post(CLAIM, body, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_claim_body_must_be_an_object(world):
    r = world.client("bob").post(CLAIM, [1], format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_progress_records_and_extends_the_lease(world):
    task = world.post()
    record = claim(world).json()
    r = world.client("bob").post(
        task_url(task.id, "progress"),
        {"worker": "box-1", "attempt": 1, "progress": {"percent": 40}},
        format="json",
    )
    assert r.status_code == 200
    assert r.json() == {"lease": r.json()["lease"], "cancelRequested": False}
    assert r.json()["lease"]["worker"] == "box-1"
    assert r.json()["lease"]["until"] >= record["lease"]["until"]
    assert world.store.read(HOST, QUEUE, task.id).progress == {"percent": 40}


def test_progress_without_a_body_field_extends_only_and_reports_a_cancel(world):
    task = world.post()
    claim(world)
    world.client("alice").post(f"{url(HOST, QUEUE)}/{task.id}/cancel")
    r = world.client("bob").post(
        task_url(task.id, "progress"), {"worker": "box-1", "attempt": 1}, format="json"
    )
    assert r.status_code == 200 and r.json()["cancelRequested"] is True
    assert world.store.read(HOST, QUEUE, task.id).progress is None


def test_result_finishes_once(world):
    task = world.post()
    claim(world)
    body = {"worker": "box-1", "attempt": 1, "result": {"bytes": 2048}}
    bob = world.client("bob")
    r = bob.post(task_url(task.id, "result"), body, format="json")
    assert r.status_code == 200 and r.json()["status"] == "finished"
    assert r.json()["result"] == {"bytes": 2048}
    r = bob.post(task_url(task.id, "result"), {**body, "result": {"x": 1}}, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "lease_lost")
    assert world.store.read(HOST, QUEUE, task.id).result == {"bytes": 2048}


def test_result_is_required(world):
    task = world.post()
    claim(world)
    r = world.client("bob").post(
        task_url(task.id, "result"), {"worker": "box-1", "attempt": 1}, format="json"
    )
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


@pytest.mark.parametrize("verb", ["progress", "result", "fail"])
@pytest.mark.parametrize(("worker", "attempt"), [("box-2", 1), ("box-1", 2), ("box-1", 0)])
def test_a_worker_without_the_lease_gets_lease_lost(world, verb, worker, attempt):
    task = world.post()
    claim(world)
    body = {"worker": worker, "attempt": attempt, "result": {}, "progress": {}}
    r = world.client("bob").post(task_url(task.id, verb), body, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "lease_lost")
    assert world.store.read(HOST, QUEUE, task.id).rev == 2  # claimed, and nothing since


@pytest.mark.parametrize("verb", ["progress", "result", "fail"])
@pytest.mark.parametrize("attempt", ["1", 1.0, True, None])
def test_attempt_must_be_an_integer(world, verb, attempt):
    task = world.post()
    claim(world)
    body = {"worker": "box-1", "attempt": attempt, "result": {}}
    r = world.client("bob").post(task_url(task.id, verb), body, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_fail_plain_retry_and_cancelled(world):
    world.queues["own"].max_attempts = 2
    world.queues["own"].save()
    bob = world.client("bob")
    failed = world.post(now=1_000)
    claim(world)
    r = bob.post(
        task_url(failed.id, "fail"),
        {"worker": "box-1", "attempt": 1, "result": {"why": "bad"}},
        format="json",
    )
    assert r.status_code == 200 and r.json()["status"] == "failed"
    assert r.json()["result"] == {"why": "bad"}

    retried = world.post(now=2_000)
    claim(world)
    r = bob.post(
        task_url(retried.id, "fail"),
        {"worker": "box-1", "attempt": 1, "retry": True},
        format="json",
    )
    assert r.status_code == 200 and r.json()["status"] == "pending"
    assert r.json()["availableAt"] > r.json()["updatedAt"]  # the backoff

    cancelled = world.post(now=3_000)
    claim(world)
    r = bob.post(
        task_url(cancelled.id, "fail"),
        {"worker": "box-1", "attempt": 1, "cancelled": True},
        format="json",
    )
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")  # not requested
    world.client("alice").post(f"{url(HOST, QUEUE)}/{cancelled.id}/cancel")
    r = bob.post(
        task_url(cancelled.id, "fail"),
        {"worker": "box-1", "attempt": 1, "cancelled": True},
        format="json",
    )
    assert r.status_code == 200 and r.json()["status"] == "cancelled"


@pytest.mark.parametrize("field", ["retry", "cancelled"])
def test_fail_flags_must_be_booleans(world, field):
    task = world.post()
    claim(world)
    r = world.client("bob").post(
        task_url(task.id, "fail"), {"worker": "box-1", "attempt": 1, field: "yes"}, format="json"
    )
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_a_stale_worker_cannot_overwrite_the_work_of_the_next(world):
    """box-1's lease lapses (time is advanced for the sweep, nobody sleeps), the sweep puts the
    task back, box-2 claims it; box-1's late result is refused and box-2's is the one kept."""
    task = world.post()
    first = claim(world).json()
    settings = world.queues["own"].to_settings()
    lapsed = first["lease"]["until"] + 1
    stores.of(HOST, QUEUE).sweep_queue(HOST, QUEUE, settings, now=lapsed)
    assert world.store.read(HOST, QUEUE, task.id).status == "pending"
    second = claim(world, worker="box-2")
    assert second.status_code == 200 and second.json()["attempts"] == 2

    bob = world.client("bob")
    late = {"worker": "box-1", "attempt": 1, "result": {"by": "box-1"}}
    r = bob.post(task_url(task.id, "result"), late, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "lease_lost")
    r = bob.post(task_url(task.id, "progress"), {"worker": "box-1", "attempt": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "lease_lost")

    good = {"worker": "box-2", "attempt": 2, "result": {"by": "box-2"}}
    assert bob.post(task_url(task.id, "result"), good, format="json").status_code == 200
    assert world.store.read(HOST, QUEUE, task.id).result == {"by": "box-2"}


def test_progress_extends_by_the_claims_own_lease(world):
    task = world.post()
    claim(world, lease=5)
    r = world.client("bob").post(
        task_url(task.id, "progress"), {"worker": "box-1", "attempt": 1}, format="json"
    )
    stored = world.store.read(HOST, QUEUE, task.id)
    assert r.json()["lease"]["until"] - stored.updated_at == 5_000


def test_a_claim_that_cannot_wait_answers_at_once_with_retry_after(world, settings):
    """Past TASKHOSTER_MAX_WAITING waiting requests in a process, a waiting claim does not wait:
    its thread stays free, and Retry-After tells the worker when to come back."""
    from queues.api import held_threads

    settings.TASKHOSTER_MAX_WAITING = 1
    with held_threads.slot() as held:  # another request of this process is already waiting
        assert held
        started = time.monotonic()
        r = claim(world, wait=5)
        assert time.monotonic() - started < 2
        assert r.status_code == 204 and r["Retry-After"] == "1"
        task = world.post()
        r = claim(world, wait=5)  # a task is there: claimed at once, no waiting needed
        assert r.status_code == 200 and r.json()["id"] == task.id
    r = claim(world, wait=0.2)  # the slot is free again: this one waits, then finds nothing
    assert r.status_code == 204 and "Retry-After" not in r


def test_a_waiting_read_that_cannot_wait_answers_at_once(world, settings):
    from queues.api import held_threads

    settings.TASKHOSTER_MAX_WAITING = 1
    task = world.post()
    alice = world.client("alice")
    with held_threads.slot():
        started = time.monotonic()
        r = alice.get(f"{url(HOST, QUEUE)}/{task.id}", {"wait": 5, "since": task.updated_at})
        assert time.monotonic() - started < 2
    assert r.status_code == 200 and r.json()["status"] == "pending"


REPLAYED = "Taskhoster-Outcome-Replayed"


@pytest.mark.parametrize(
    ("verb", "body", "status"),
    [
        ("result", {"result": {"bytes": 2048}}, "finished"),
        ("fail", {"result": {"why": "bad png"}}, "failed"),
        ("fail", {"result": {"why": "busy"}, "retry": True}, "pending"),
    ],
)
def test_the_same_outcome_twice_answers_200_and_says_it_was_a_replay(world, verb, body, status):
    """A worker that lost the answer to its report sends it again: the task as it stands, and
    the header; a different body, another worker or another attempt is still lease_lost."""
    world.queues["own"].max_attempts = 3
    world.queues["own"].save()
    task = world.post()
    claim(world)
    bob, report = world.client("bob"), {"worker": "box-1", "attempt": 1, **body}
    first = bob.post(task_url(task.id, verb), report, format="json")
    assert first.status_code == 200 and first.json()["status"] == status
    assert REPLAYED not in first
    lines, rev = len(world.events(task.id)), world.store.read(HOST, QUEUE, task.id).rev

    again = bob.post(task_url(task.id, verb), report, format="json")
    assert again.status_code == 200 and again[REPLAYED] == "true"
    assert again.json() == first.json()
    assert len(world.events(task.id)) == lines  # nothing happened twice

    for other in (
        {**report, "result": {"something": "else"}},
        {**report, "worker": "box-2"},
        {**report, "attempt": 2},
    ):
        r = bob.post(task_url(task.id, verb), other, format="json")
        assert (r.status_code, r.json()["code"]) == (409, "lease_lost")
        assert REPLAYED not in r
    assert world.store.read(HOST, QUEUE, task.id).rev == rev


def test_a_retried_failure_is_no_replay_once_another_worker_claimed_the_task(world):
    world.queues["own"].max_attempts = 3
    world.queues["own"].backoff_seconds = 1
    world.queues["own"].save()
    task = world.post()
    claim(world)
    report = {"worker": "box-1", "attempt": 1, "result": {"why": "busy"}, "retry": True}
    bob = world.client("bob")
    assert bob.post(task_url(task.id, "fail"), report, format="json").status_code == 200
    settings = world.queues["own"].to_settings()
    available = world.store.read(HOST, QUEUE, task.id).available_at
    world.store.claim(HOST, QUEUE, settings=settings, worker="box-2", now=available)
    r = bob.post(task_url(task.id, "fail"), report, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "lease_lost")


def test_a_heartbeat_writes_no_event_line(world):
    task = world.post()
    claim(world)
    lines = len(world.events(task.id))
    bob, beat = world.client("bob"), {"worker": "box-1", "attempt": 1}
    for _ in range(5):
        assert bob.post(task_url(task.id, "progress"), beat, format="json").status_code == 200
    assert len(world.events(task.id)) == lines
    told = {**beat, "progress": {"percent": 50}}
    assert bob.post(task_url(task.id, "progress"), told, format="json").status_code == 200
    assert [e["event"] for e in world.events(task.id)[lines:]] == ["progress"]


def test_the_status_view_shows_when_a_retried_task_was_requeued(world):
    task = world.post(now=1_000)
    claim(world)
    bob = world.client("bob")
    bob.post(task_url(task.id, "fail"), {"worker": "box-1", "attempt": 1}, format="json")
    r = world.client("olga").post(f"{url(HOST, QUEUE)}/{task.id}/retry")
    assert r.status_code == 200
    view = r.json()
    assert view["postedAt"] == 1_000 and view["requeuedAt"] >= view["updatedAt"] > 1_000
    assert "endedBy" not in view  # the worker that ended the attempt is not the producer's
    read = world.client("alice").get(f"{url(HOST, QUEUE)}/{task.id}").json()
    assert read["requeuedAt"] == view["requeuedAt"]
