"""Workers against a real gunicorn: cross-process wake, the client's worker loop, lease fencing."""

import threading
import time

import pytest

from queues.store import QueueSettings, QueueStore, StoreConfig
from taskhoster import ApiError, Retry, run_worker

from .live import HOST

pytestmark = pytest.mark.slow


def test_a_waiting_claim_wakes_promptly_on_a_post_from_another_process(live, clients):
    got: list[tuple[float, dict]] = []

    def wait_for_one() -> None:
        task = clients["wendy"].claim(HOST, "wake", "waiter", wait=20)
        got.append((time.monotonic(), task))

    waiter = threading.Thread(target=wait_for_one)
    waiter.start()
    time.sleep(0.5)  # the claim is waiting inside gunicorn
    # This test process is not gunicorn: the store's post here reaches the server only
    # through the file system.
    store = QueueStore(StoreConfig(items_dir=live.items, logs_dir=live.logs, fsync=False))
    posted_at = time.monotonic()
    task = store.post(HOST, "wake", {"n": 1}, settings=QueueSettings(), posted_by="paul").task
    waiter.join(20)
    store.close()
    [(claimed_at, claimed)] = got
    assert claimed["id"] == task.id
    assert claimed_at - posted_at < 1.0  # woken by the file system, not by the 20 s wait


def run_one(clients, queue, handler, *, lease=60):
    """Post one task, let run_worker handle exactly it, and return its final status view."""
    task = clients["paul"].post(HOST, queue, {"n": 1})
    handled = run_worker(clients["wendy"], HOST, queue, "loop", handler, lease=lease, wait=5,
                         max_tasks=1)  # fmt: skip
    assert handled == 1
    return clients["olga"].get(HOST, queue, task["id"])


def test_a_handlers_result_arrives(live, clients):
    final = run_one(clients, "result", lambda job: {"double": job.item["n"] * 2})
    assert (final["status"], final["result"]) == ("finished", {"double": 2})


def test_a_handler_exception_becomes_a_failure(live, clients):
    def broken(job):
        raise ValueError("cannot resize a PDF")

    final = run_one(clients, "fail", broken)
    assert final["status"] == "failed"
    assert "cannot resize a PDF" in str(final.get("result") or final.get("error"))


def test_a_retry_puts_the_task_back(live, clients):
    def busy(job):
        raise Retry("upstream busy")

    final = run_one(clients, "retry", busy)
    assert final["status"] == "pending" and final["attempts"] == 1


def test_heartbeats_keep_a_task_past_its_lease(live, clients):
    def slow(job):
        time.sleep(1.6)  # past the 1 s lease; the heartbeat extends it every ~0.33 s
        live.sweep()  # a sweep that found the lease lapsed would requeue it
        return {"slow": True}

    final = run_one(clients, "beat", slow, lease=1)
    assert (final["status"], final["attempts"]) == ("finished", 1)


def test_a_stale_workers_result_is_refused_after_a_reclaim(live, clients):
    task = clients["paul"].post(HOST, "stale", {"n": 1})
    first = clients["wendy"].claim(HOST, "stale", "slow-box", lease=1)
    assert first["id"] == task["id"]
    time.sleep(1.1)
    live.sweep()  # lease lapsed: back to pending
    second = clients["wendy"].claim(HOST, "stale", "fast-box", wait=5)
    assert second["id"] == task["id"] and second["attempts"] == 2
    with pytest.raises(ApiError) as refused:
        clients["wendy"].result(HOST, "stale", task["id"], "slow-box", first["attempts"], {})
    assert (refused.value.status, refused.value.code) == (409, "lease_lost")
    clients["wendy"].result(HOST, "stale", task["id"], "fast-box", second["attempts"], {})
