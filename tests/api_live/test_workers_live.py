"""Workers against a real gunicorn: cross-process wake, the client's worker loop, lease fencing."""

import logging
import threading
import time

import pytest

from queues.store import QueueSettings, QueueStore, StoreConfig
from taskhoster import ApiError, Fail, Retry, run_worker

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
    # woken by the post (inotify, or the 50 ms poll without it), not by the end of its 20 s
    # wait: half the wait is a bound a loaded machine never reaches, unlike a speed bound
    assert claimed_at - posted_at < 10.0


def work(clients, queue, handler, *, tasks, lease=60):
    """run_worker until it handled `tasks` claims; a guard stops a loop that never gets them
    (a test must fail, not hang), and how many it handled is what the caller asserts on."""
    stop = threading.Event()
    guard = threading.Timer(60, stop.set)
    guard.start()
    try:
        return run_worker(clients["wendy"], HOST, queue, "loop", handler, lease=lease, wait=5,
                          max_tasks=tasks, stop_event=stop)  # fmt: skip
    finally:
        guard.cancel()


def run_one(clients, queue, handler, *, lease=60):
    """Post one task, let run_worker handle exactly it, and return its final status view."""
    task = clients["paul"].post(HOST, queue, {"n": 1})
    assert work(clients, queue, handler, tasks=1, lease=lease) == 1
    return clients["olga"].get(HOST, queue, task["id"])


def test_a_handlers_result_arrives(live, clients):
    final = run_one(clients, "result", lambda job: {"double": job.item["n"] * 2})
    assert (final["status"], final["result"]) == ("finished", {"double": 2})


def test_a_handler_exception_is_retried_until_the_budget_then_fails_with_its_traceback(
    live, clients, caplog
):
    def broken(job):
        seen.append(job.attempt)
        raise ValueError("cannot resize a PDF")

    seen: list[int] = []
    task = clients["paul"].post(HOST, "flaky", {"n": 1})  # budget 3, no backoff
    with caplog.at_level(logging.INFO, logger="taskhoster.worker"):
        handled = work(clients, "flaky", broken, tasks=3)
    assert handled == 3 and seen == [1, 2, 3]
    final = clients["olga"].get(HOST, "flaky", task["id"])
    assert (final["status"], final["attempts"], final["error"]) == ("failed", 3, "attempts")
    result = final["result"]
    assert result["error"] == "ValueError: cannot resize a PDF"
    assert result["type"] == "ValueError"
    assert 'raise ValueError("cannot resize a PDF")' in result["traceback"]
    assert result["traceback"].endswith("ValueError: cannot resize a PDF")
    logged = [r for r in caplog.records if r.name == "taskhoster.worker"]
    raised = [r for r in logged if r.exc_info]  # one traceback an attempt
    assert [r.levelno for r in raised] == [logging.WARNING] * 3
    assert all(r.exc_info[0] is ValueError for r in raised)
    outcomes = [r.getMessage() for r in logged if r.levelno == logging.WARNING and not r.exc_info]
    assert len(outcomes) == 3 and all("cannot resize a PDF" in line for line in outcomes)
    assert "retrying in" in outcomes[0] and "on its last attempt" in outcomes[-1]


def test_a_handler_exception_on_a_queue_without_a_budget_fails_at_once(live, clients):
    def broken(job):
        raise KeyError("width")

    final = run_one(clients, "nobudget", broken)
    assert (final["status"], final["attempts"]) == ("failed", 1)
    assert final["result"]["error"] == "KeyError: 'width'"
    assert "raise KeyError" in final["result"]["traceback"]


def test_a_handler_raising_fail_fails_the_task_for_good(live, clients):
    def refuse(job):
        raise Fail("not an image")

    final = run_one(clients, "fail", refuse)  # a budget of 8 left, and not used
    assert (final["status"], final["attempts"]) == ("failed", 1)
    assert final["result"] == {"error": "not an image", "type": "Fail"}


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


def test_a_claim_on_a_paused_queue_says_so(live, clients):
    clients["paul"].post(HOST, "paused", {"n": 1})
    answer = clients["wendy"].claim_answer(HOST, "paused", "box-1", wait=0.2)
    assert (answer.tasks, answer.paused) == ([], True)
    stats = clients["wendy"].stats(HOST, "paused")
    assert (stats["paused"], stats["pending"]) == (True, 1)


POOL = 4


def test_a_pool_runs_n_handlers_at_once_and_claims_several_per_request(live, clients):
    # Each handler waits until all POOL of them are running: one at a time would break the
    # barrier (its timeout), and the task would end failed instead of finished.
    barrier = threading.Barrier(POOL, timeout=20)
    claims: list[int] = []

    class Counting(type(clients["wendy"])):
        def claim_answer(self, *args, **kwargs):
            answer = super().claim_answer(*args, **kwargs)
            claims.append(len(answer.tasks))
            return answer

    def together(job):
        barrier.wait()
        return {"n": job.item["n"]}

    posted = [clients["paul"].post(HOST, "pool", {"n": n})["id"] for n in range(POOL)]
    counting = Counting(live.url, live.tokens["wendy"], timeout=15)
    stop = threading.Event()
    guard = threading.Timer(60, stop.set)
    guard.start()
    try:
        handled = run_worker(counting, HOST, "pool", "pool", together, wait=5, max_tasks=POOL,
                             concurrency=POOL, stop_event=stop)  # fmt: skip
    finally:
        guard.cancel()
    assert handled == POOL
    finals = [clients["olga"].get(HOST, "pool", id) for id in posted]
    assert [f["status"] for f in finals] == ["finished"] * POOL
    assert sorted(f["result"]["n"] for f in finals) == list(range(POOL))
    assert max(claims) > 1  # one request took several tasks


def test_a_stopped_pool_claims_no_more_and_lets_its_handlers_finish(live, clients):
    started = threading.Barrier(3, timeout=20)  # two handlers and this test
    release = threading.Event()
    stop = threading.Event()

    def slow(job):
        started.wait()
        release.wait(20)
        return {"n": job.item["n"]}

    posted = [clients["paul"].post(HOST, "poolstop", {"n": n})["id"] for n in range(3)]
    done: list[int] = []
    loop = threading.Thread(target=lambda: done.append(run_worker(
        clients["wendy"], HOST, "poolstop", "pool", slow, wait=1, concurrency=2,
        stop_event=stop)))  # fmt: skip
    loop.start()
    started.wait()  # two handlers run; the third task waits for a slot
    stop.set()
    release.set()
    loop.join(30)
    assert done == [2]
    statuses = sorted(clients["olga"].get(HOST, "poolstop", id)["status"] for id in posted)
    assert statuses == ["finished", "finished", "pending"]


def test_post_many_and_finish_many_through_the_client(live, clients):
    posted = clients["paul"].post_many(
        HOST, "batch", [{"item": {"n": n}, "priority": n} for n in range(3)]
    )
    assert [t["status"] for t in posted] == ["pending"] * 3
    with pytest.raises(ApiError) as refused:
        clients["paul"].post_many(HOST, "batch", [{"item": {}}, {"item": "not an object"}])
    assert refused.value.code == "invalid_item" and refused.value.index == 1
    claimed = clients["wendy"].claim(HOST, "batch", "box", max=3)
    assert [t["item"]["n"] for t in claimed] == [2, 1, 0]  # by priority
    outcomes = [{"id": t["id"], "attempt": 1, "outcome": "result", "result": {}} for t in claimed]
    outcomes[1]["attempt"] = 2  # not this attempt: refused in its slot alone
    answers = clients["wendy"].finish_many(HOST, "batch", "box", outcomes)
    assert [a["status"] for a in answers] == [200, 409, 200]
    assert answers[1]["code"] == "lease_lost"
    assert clients["olga"].get(HOST, "batch", claimed[1]["id"])["status"] == "processing"


def test_a_pool_reports_the_outcomes_that_end_together_in_one_batch(live, clients):
    n = 4
    barrier = threading.Barrier(n, timeout=20)  # every handler ends at about the same time
    sent: list[list[str]] = []

    class Counting(type(clients["wendy"])):
        def finish_many_answer(self, host, queue, worker, outcomes, **kwargs):
            sent.append([o["outcome"] for o in outcomes])
            return super().finish_many_answer(host, queue, worker, outcomes, **kwargs)

        def result(self, *args, **kwargs):  # a batching pool never reports one by one
            raise AssertionError("a single result was sent")

    def handler(job):
        barrier.wait()
        kind = job.item["kind"]
        if kind == "retry" and job.attempt == 1:
            raise Retry("once more")
        if kind == "fail":
            raise Fail("bad input")
        if kind == "big":
            return {"x": "y" * 5000}  # over the queue's 2000 bytes: failed as ResultTooLarge
        return {"n": job.attempt}

    kinds = ["ok", "retry", "fail", "big"]
    posted = clients["paul"].post_many(HOST, "batchpool", [{"item": {"kind": k}} for k in kinds])
    counting = Counting(live.url, live.tokens["wendy"], timeout=15)
    stop = threading.Event()
    guard = threading.Timer(60, stop.set)
    guard.start()
    try:
        handled = run_worker(counting, HOST, "batchpool", "pool", handler, wait=5,
                             max_tasks=n, concurrency=n, stop_event=stop)  # fmt: skip
    finally:
        guard.cancel()
    assert handled == n
    assert max(len(batch) for batch in sent) > 1  # outcomes shared a request
    assert sorted(k for batch in sent for k in batch) == ["fail", "result", "result", "retry"]
    finals = {k: clients["olga"].get(HOST, "batchpool", t["id"]) for k, t in zip(kinds, posted)}
    assert finals["ok"]["status"] == "finished"
    assert finals["retry"]["status"] == "pending" and finals["retry"]["lastError"]
    assert finals["fail"]["status"] == "failed"
    assert finals["big"]["status"] == "failed"
    assert finals["big"]["result"]["type"] == "ResultTooLarge"


def counted(live, clients, sent: list[tuple[str, str, bool]]):
    """wendy's client, noting each request it sends: its method, the path's last part, and
    whether its body asked for the next task."""

    class Counting(type(clients["wendy"])):
        def request(self, method, path, **options):
            body = options.get("body")
            sent.append(
                (method, path.rsplit("/", 1)[-1], isinstance(body, dict) and "next" in body)
            )
            return super().request(method, path, **options)

    return Counting(live.url, live.tokens["wendy"], timeout=15)


def work_counted(live, clients, queue, sent, *, tasks, concurrency=1):
    """run_worker on `queue` with the counting client, until it handled `tasks` claims (a
    guard stops a loop that never gets them)."""
    stop = threading.Event()
    guard = threading.Timer(60, stop.set)
    guard.start()
    try:
        return run_worker(counted(live, clients, sent), HOST, queue, "loop",
                          lambda job: {"n": job.item["n"]}, wait=5, max_tasks=tasks,
                          concurrency=concurrency, stop_event=stop)  # fmt: skip
    finally:
        guard.cancel()


def test_each_report_claims_the_next_task_so_a_task_costs_one_worker_request(live, clients):
    posted = [clients["paul"].post(HOST, "chain", {"n": n})["id"] for n in range(5)]
    sent: list[tuple[str, str, bool]] = []
    assert work_counted(live, clients, "chain", sent, tasks=5) == 5
    finals = [clients["olga"].get(HOST, "chain", id) for id in posted]
    assert [f["result"]["n"] for f in finals if f["status"] == "finished"] == list(range(5))
    # one claim, then five results, each but the last claiming the next (max_tasks is spent)
    assert sent == [("POST", "claim", False)] + [("POST", "result", True)] * 4 + [
        ("POST", "result", False)
    ]


def test_max_tasks_holds_across_the_reports_next_claims(live, clients):
    posted = [clients["paul"].post(HOST, "chainbudget", {"n": n})["id"] for n in range(5)]
    handled = work(clients, "chainbudget", lambda job: {}, tasks=3)
    assert handled == 3
    statuses = [clients["olga"].get(HOST, "chainbudget", id)["status"] for id in posted]
    assert statuses == ["finished"] * 3 + ["pending"] * 2


def test_a_pools_batch_finish_claims_a_next_task_for_each_slot_it_frees(live, clients):
    posted = clients["paul"].post_many(HOST, "chainpool", [{"item": {"n": n}} for n in range(8)])
    sent: list[tuple[str, str, bool]] = []
    assert work_counted(live, clients, "chainpool", sent, tasks=8, concurrency=4) == 8
    finals = [clients["olga"].get(HOST, "chainpool", t["id"])["status"] for t in posted]
    assert finals == ["finished"] * 8
    assert [what for _, what, _ in sent].count("claim") == 1  # the rest came with the reports
    assert any(asked for _, what, asked in sent if what == "finish")
