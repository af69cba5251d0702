"""Producers' endpoints through the DRF test client: exact status, code and headers."""

import threading
import time

import pytest

from queues.store import QueueFull, State, StorageUnavailable
from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db(transaction=False)
TASKS = url(HOST, QUEUE)


def task_url(task_id: str, rest: str = "") -> str:
    return f"{TASKS}/{task_id}{rest}"


def test_post_answers_201_with_the_status_view_and_location(world):
    r = world.client("alice").post(TASKS, {"url": "https://ex.com/a.png"}, format="json")
    assert r.status_code == 201
    body = r.json()
    assert body["status"] == "pending" and body["attempts"] == 0
    assert "item" not in body and "postedBy" not in body  # the status view, not the record
    assert r["Location"] == task_url(body["id"])
    assert "Idempotent-Replayed" not in r
    stored = world.store.read(HOST, QUEUE, body["id"])
    assert stored.posted_by == "alice" and stored.item == {"url": "https://ex.com/a.png"}


def test_post_with_delay_and_priority(world):
    r = world.client("alice").post(TASKS + "?delay=30&priority=7", {"n": 1}, format="json")
    assert r.status_code == 201
    body = r.json()
    assert body["priority"] == 7
    assert body["availableAt"] >= body["postedAt"] + 30_000


@pytest.mark.parametrize(
    "query",
    [
        "priority=101",
        "priority=-101",
        "priority=x",
        "delay=-1",
        "delay=86401",
        "delay=1.5",
        "priority=1e400",
    ],
)
def test_post_refuses_options_out_of_range(world, query):
    r = world.client("alice").post(f"{TASKS}?{query}", {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_idempotent_replay_answers_200_with_the_first_task(world):
    alice = world.client("alice")
    first = alice.post(TASKS, {"n": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = alice.post(TASKS, {"n": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"] and again["Location"] == first["Location"]
    assert world.store.list_tasks(HOST, QUEUE).count == 1


def test_idempotency_key_reused_with_another_item_is_422(world):
    alice = world.client("alice")
    alice.post(TASKS, {"n": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    r = alice.post(TASKS, {"n": 2}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert (r.status_code, r.json()["code"]) == (422, "idempotency_key_reused")


def test_idempotency_keys_are_per_producer(world):
    a = world.client("alice").post(TASKS, {"n": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    p = world.client("paula").post(TASKS, {"n": 1}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert (a.status_code, p.status_code) == (201, 201)
    assert a.json()["id"] != p.json()["id"]


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "two words"])
def test_bad_idempotency_key_is_invalid_request(world, key):
    r = world.client("alice").post(TASKS, {"n": 1}, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_queue_full_is_429_with_retry_after(world):
    world.queues["own"].max_pending = 1
    world.queues["own"].save()
    alice = world.client("alice")
    assert alice.post(TASKS, {"n": 1}, format="json").status_code == 201
    r = alice.post(TASKS, {"n": 2}, format="json")
    assert (r.status_code, r.json()["code"]) == (429, "queue_full")
    assert int(r["Retry-After"]) >= 1


def test_storage_unavailable_is_503(world, monkeypatch):
    def broken(*args, **kwargs):
        raise StorageUnavailable()

    monkeypatch.setattr(world.store, "post", broken)
    r = world.client("alice").post(TASKS, {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (503, "storage_unavailable")


def test_item_schema_failure_is_invalid_item_naming_the_path(world):
    world.queues["own"].item_schema = {
        "type": "object",
        "properties": {"width": {"type": "integer"}},
        "required": ["width"],
    }
    world.queues["own"].save()
    r = world.client("alice").post(TASKS, {"width": "wide"}, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_item")
    assert "width" in r.json()["detail"]


def test_public_post_needs_no_token_and_its_id_is_its_key(world):
    world.queues["own"].public_post = True
    world.queues["own"].save()
    anonymous = world.client("anonymous")
    r = anonymous.post(TASKS, {"n": 1}, format="json")
    assert r.status_code == 201
    task_id = r.json()["id"]
    assert world.store.read(HOST, QUEUE, task_id).posted_by is None
    assert anonymous.get(task_url(task_id)).status_code == 200
    # alice's own task stays hers: the public sees the same 404 as for no task at all
    own = world.post(by="alice")
    assert anonymous.get(task_url(own.id)).status_code == 404
    assert anonymous.get(TASKS).status_code == 401  # listing is never public
    assert anonymous.post(task_url(task_id, "/cancel")).status_code == 401


def test_worker_posting_to_a_public_queue_posts_publicly(world):
    world.queues["own"].public_post = True
    world.queues["own"].save()
    r = world.client("bob").post(TASKS, {"n": 1}, format="json")
    assert r.status_code == 201
    assert world.store.read(HOST, QUEUE, r.json()["id"]).posted_by is None


def finish(world, task_id: str) -> None:
    task = world.claim()
    assert task.id == task_id
    world.store.finish(
        HOST,
        QUEUE,
        task_id,
        settings=world.queues["own"].to_settings(),
        worker="box-1",
        attempt=task.attempts,
        result={"bytes": 2048},
    )


def test_first_producer_read_of_a_result_stamps_fetched_at(world):
    task = world.post()
    finish(world, task.id)
    r = world.client("olga").get(task_url(task.id))  # an operator's look does not count
    assert r.status_code == 200 and r.json()["result"] == {"bytes": 2048}
    assert world.store.read(HOST, QUEUE, task.id).fetched_at is None
    r = world.client("alice").get(task_url(task.id))
    assert r.status_code == 200 and r.json()["status"] == "finished"
    fetched = world.store.read(HOST, QUEUE, task.id).fetched_at
    assert fetched is not None
    world.client("alice").get(task_url(task.id))
    assert world.store.read(HOST, QUEUE, task.id).fetched_at == fetched  # only the first


def test_read_of_a_pending_task_stamps_nothing(world):
    task = world.post()
    r = world.client("alice").get(task_url(task.id))
    assert r.json()["status"] == "pending" and r.json()["updatedAt"] == task.updated_at
    assert world.store.read(HOST, QUEUE, task.id).rev == task.rev


def test_waiting_read_returns_when_the_task_changes(world):
    task = world.post()
    settings = world.queues["own"].to_settings()
    changer = threading.Timer(
        0.2, lambda: world.store.cancel(HOST, QUEUE, task.id, settings=settings)
    )
    changer.start()
    started = time.monotonic()
    r = world.client("alice").get(task_url(task.id) + f"?wait=20&since={task.updated_at}")
    changer.join()
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert time.monotonic() - started < 10


def test_waiting_read_with_an_old_since_answers_at_once(world):
    task = world.post()
    started = time.monotonic()
    r = world.client("alice").get(task_url(task.id) + "?wait=30&since=1")
    assert r.status_code == 200 and time.monotonic() - started < 5


def test_waiting_read_ends_when_the_wait_does(world):
    task = world.post()
    r = world.client("alice").get(task_url(task.id) + "?wait=0.2")
    assert r.status_code == 200 and r.json()["updatedAt"] == task.updated_at


@pytest.mark.parametrize("query", ["wait=61", "wait=-1", "wait=x", "wait=nan", "since=x"])
def test_waiting_read_refuses_bad_parameters(world, query):
    task = world.post()
    r = world.client("alice").get(task_url(task.id) + "?" + query)
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_list_shows_a_producer_its_own_tasks_and_an_operator_all(world):
    mine = [world.post(by="alice", now=1_000 + i) for i in range(3)]
    world.post(by="paula", now=2_000)
    r = world.client("alice").get(TASKS)
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 3 and body["next"] is None and body["previous"] is None
    assert [t["id"] for t in body["results"]] == [t.id for t in reversed(mine)]  # newest first
    assert world.client("olga").get(TASKS).json()["count"] == 4


def test_an_operator_sees_which_worker_holds_or_ended_a_task_and_a_producer_does_not(world):
    running, ended, waiting = (world.post(now=1_000 + i) for i in range(3))
    assert world.claim(worker="box-1").id == running.id
    assert world.claim(worker="box-2").id == ended.id
    world.store.finish(HOST, QUEUE, ended.id, settings=world.queues["own"].to_settings(),
                       worker="box-2", attempt=1, result={"ok": 1})  # fmt: skip
    listed = world.client("olga").get(TASKS).json()["results"]
    assert {t["id"]: t.get("worker") for t in listed} == {
        running.id: "box-1", ended.id: "box-2", waiting.id: None}  # fmt: skip
    assert world.client("olga").get(task_url(running.id)).json()["worker"] == "box-1"
    cancelled = world.client("olga").post(task_url(running.id, "/cancel"))
    assert (cancelled.status_code, cancelled.json()["worker"]) == (202, "box-1")
    for view in [*world.client("alice").get(TASKS).json()["results"],
                 world.client("alice").get(task_url(running.id)).json(),
                 world.client("alice").post(task_url(running.id, "/cancel")).json()]:  # fmt: skip
        assert "worker" not in view


def test_list_filters_by_status_and_pages(world):
    tasks = [world.post(now=1_000 + i) for i in range(5)]
    world.store.cancel(HOST, QUEUE, tasks[0].id, settings=world.queues["own"].to_settings())
    alice = world.client("alice")
    assert alice.get(TASKS + "?status=cancelled").json()["count"] == 1
    assert alice.get(TASKS + "?status=pending").json()["count"] == 4
    page = alice.get(TASKS + "?limit=2&offset=2").json()
    assert page["count"] == 5 and len(page["results"]) == 2
    assert "offset=4" in page["next"] and "limit=2" in page["next"]
    assert "offset" not in page["previous"] and "limit=2" in page["previous"]
    last = alice.get(page["next"]).json()
    assert len(last["results"]) == 1 and last["next"] is None


@pytest.mark.parametrize(("limit", "shown"), [("0", 1), ("-5", 1), ("1000", 3), ("2", 2)])
def test_list_clamps_limit_instead_of_refusing(world, limit, shown):
    for i in range(3):
        world.post(now=1_000 + i)
    r = world.client("alice").get(f"{TASKS}?limit={limit}")
    assert r.status_code == 200 and len(r.json()["results"]) == shown


@pytest.mark.parametrize("query", ["status=done", "limit=x", "offset=y"])
def test_list_refuses_bad_parameters(world, query):
    r = world.client("alice").get(f"{TASKS}?{query}")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_list_of_a_queue_never_posted_to_is_empty(world):
    r = world.client("olga").get(TASKS)
    assert r.status_code == 200 and r.json()["count"] == 0


def test_cancel_pending_is_200_processing_202_terminal_409(world):
    alice = world.client("alice")
    pending = world.post()
    r = alice.post(task_url(pending.id, "/cancel"))
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    running = world.post()
    world.claim()
    r = alice.post(task_url(running.id, "/cancel"))
    assert r.status_code == 202
    assert r.json()["status"] == "processing" and r.json()["cancelRequested"] is True
    r = alice.post(task_url(pending.id, "/cancel"))
    assert (r.status_code, r.json()["code"]) == (409, "not_cancellable")


def test_operator_cancels_anyones_task(world):
    task = world.post(by="paula")
    r = world.client("olga").post(task_url(task.id, "/cancel"))
    assert r.status_code == 200


def test_retry_failed_or_cancelled_is_200_else_409(world):
    alice = world.client("alice")
    task = world.post()
    r = alice.post(task_url(task.id, "/retry"))
    assert (r.status_code, r.json()["code"]) == (409, "not_retryable")
    world.store.cancel(HOST, QUEUE, task.id, settings=world.queues["own"].to_settings())
    r = alice.post(task_url(task.id, "/retry"))
    assert r.status_code == 200 and r.json()["status"] == State.PENDING.value


def test_queue_full_error_carries_retry_after_from_the_store(world, monkeypatch):
    def full(*args, **kwargs):
        raise QueueFull(retry_after=17)

    monkeypatch.setattr(world.store, "post", full)
    r = world.client("alice").post(TASKS, {"n": 1}, format="json")
    assert r.status_code == 429 and r["Retry-After"] == "17"


def test_a_transition_the_store_refuses_is_a_logged_500_internal(world, monkeypatch, caplog):
    """A change not in the store's table is the server's bug, not the caller's: 500 with the
    code internal, a log line naming the task and its states, and nothing written."""
    world.files_only("the bug is planted in the file store's write path (core.apply); the "
                     "PostgreSQL store checks the same table (tests/store)")  # fmt: skip
    task = world.post()
    store = world.store

    def buggy_cancel(host, queue, task_id, *, settings, now=None):
        # a cancel that (wrongly) finishes the pending task: the table refuses it in apply
        current = store.read(host, queue, task_id)
        wrong = current.replace(status=State.FINISHED, updated_at=current.updated_at + 1)
        with store.queue_dirs(host, queue) as qd:
            return store.core.apply(qd, "pending", current, wrong, "result", now=current.updated_at)

    monkeypatch.setattr(store, "cancel", buggy_cancel)
    with caplog.at_level("ERROR", logger="queues.api.errors"):
        r = world.client("alice").post(task_url(task.id, "/cancel"))
    assert r.status_code == 500 and r.json()["code"] == "internal"
    assert task.id not in r.json()["detail"]  # the details are for the operator's log
    [line] = [r for r in caplog.records if r.name == "queues.api.errors" and r.levelname == "ERROR"]
    assert task.id in line.getMessage() and "pending" in line.getMessage()
    assert "finished" in line.getMessage()
    assert store.read(HOST, QUEUE, task.id).status is State.PENDING


def test_an_unreachable_console_database_is_503_storage_unavailable_not_a_500_page():
    """The token lookup meets the database restarting: nothing was done, and the client must
    hear a 503 it retries (the chaos run's PostgreSQL restarts met this), not Django's page."""
    from django.db import OperationalError

    from queues.api.errors import exception_handler

    down = OperationalError("connection failed: FATAL:  the database system is starting up")
    r = exception_handler(down, {})
    assert r is not None
    assert (r.status_code, r.data["code"]) == (503, "storage_unavailable")


def test_a_post_to_an_archiving_queue_on_a_read_only_log_is_503_and_posts_nothing(
    world, store_dirs
):
    """The payload archive's mkdir met a read-only file system and answered 500."""
    from tests.store.mounts import read_only, small_fs, writable

    world.files_only("the payload archive of a PostgreSQL queue is a table")
    world.queues["own"].archive_payloads = True
    world.queues["own"].save()
    logs = store_dirs["logs"]
    with small_fs(logs):
        (logs / "tasks").mkdir()
        read_only(logs)
        try:
            r = world.client("alice").post(TASKS, {"n": 1}, format="json")
            assert (r.status_code, r.json()["code"]) == (503, "storage_unavailable")
            pending = store_dirs["items"] / HOST / QUEUE / "pending"
            assert list(pending.iterdir()) == []
        finally:
            world.store.close()  # its day-file descriptor, before the file system goes
            writable(logs)


def test_an_operators_hasten_makes_a_delayed_task_claimable_now_else_409(world):
    olga = world.client("olga")
    waiting = world.post(delay_seconds=3600)
    r = olga.post(task_url(waiting.id, "/hasten"))
    assert r.status_code == 200 and r.json()["status"] == State.PENDING.value
    assert not r.json().get("availableAt")
    assert world.claim().id == waiting.id  # claimable at once, not in an hour
    r = olga.post(task_url(waiting.id, "/hasten"))
    assert (r.status_code, r.json()["code"]) == (409, "not_waiting")
    assert "backoff" in r.json()["detail"]
    hastened = [line for line in world.events(waiting.id) if line["event"] == "hastened"]
    assert [line["by"] for line in hastened] == ["olga"]
