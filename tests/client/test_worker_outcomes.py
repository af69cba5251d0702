"""The worker pool's report of what a handler raised, against the live server: a Retry after a
cancel request, and a SystemExit (docs/client.md, the worker loop)."""

from __future__ import annotations

import logging
import sys
import threading

import pytest

from taskhoster import Retry, run_worker
from tests.api_live.live import HOST

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_retry_raised_after_a_cancel_request_ends_the_task_cancelled(
    clients, queues, concurrency
):
    task = clients["paul"].post(HOST, "cwcancel", {"n": concurrency})
    seen = []

    def handler(job):
        clients["olga"].cancel(HOST, "cwcancel", job.id)
        # the next heartbeat (every third of the 1 s lease) brings the request
        seen.append(job.cancel_requested.wait(20))
        raise Retry("upstream busy")

    run_worker(clients["wendy"], HOST, "cwcancel", "cw-cancel", handler, lease=1, wait=1,
               max_tasks=1, concurrency=concurrency)  # fmt: skip
    assert seen == [True]
    final = clients["olga"].get(HOST, "cwcancel", task["id"])
    assert final["status"] == "cancelled", final
    assert final["result"]["error"] == "upstream busy"


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_handler_calling_sys_exit_fails_its_attempt_and_the_worker_carries_on(
    clients, queues, caplog, concurrency
):
    exits = clients["paul"].post(HOST, "cwexit", {"exit": True})
    after = clients["paul"].post(HOST, "cwexit", {"exit": False})

    def handler(job):
        if job.item["exit"]:
            sys.exit(3)
        return {"ran": True}

    stop = threading.Event()
    worker = threading.Thread(
        target=run_worker,
        args=(clients["wendy"], HOST, "cwexit", "cw-exit", handler),
        # the exiting task twice (its budget is 2), then the other one
        kwargs={
            "lease": 60,
            "wait": 1,
            "max_tasks": 3,
            "concurrency": concurrency,
            "stop_event": stop,
        },
    )
    with caplog.at_level(logging.WARNING, logger="taskhoster.worker"):
        worker.start()
        worker.join(60)  # an unreported attempt would leave it claiming for ever
        stop.set()
        worker.join()
    failed = clients["olga"].get(HOST, "cwexit", exits["id"])
    assert (failed["status"], failed["error"], failed["attempts"]) == ("failed", "attempts", 2)
    assert failed["result"]["error"] == "SystemExit: 3"
    assert failed["result"]["type"] == "SystemExit"
    assert "sys.exit(3)" in failed["result"]["traceback"]
    assert clients["olga"].get(HOST, "cwexit", after["id"])["result"] == {"ran": True}
    warned = [r.getMessage() for r in caplog.records if exits["id"] in r.getMessage()]
    tracebacks = [r for r in caplog.records if exits["id"] in r.getMessage() and r.exc_info]
    assert len(tracebacks) == 2  # one per attempt, each followed by the outcome's line
    assert warned[0] == f"task {exits['id']} raised on attempt 1"
    assert warned[1].startswith(f"task {exits['id']} failed in ")
    assert warned[1].endswith("(SystemExit: 3); retrying in 0 s (attempt 2 of 2)")
    assert warned[3].endswith("on its last attempt (SystemExit: 3)")
