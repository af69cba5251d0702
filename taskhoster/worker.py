"""A worker loop: claim (waiting), heartbeat while the handler runs, report the outcome."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .client import ApiError, Client

log = logging.getLogger("taskhoster.worker")

CLAIM_WAIT_SECONDS = 20  # a waiting claim returns as soon as a task is posted
ERROR_PAUSE_SECONDS = 1.0  # after a failed claim (server down), before the next one


class Retry(Exception):
    """Raised by a handler: fail this attempt and let the queue retry it after the backoff."""


class Cancelled(Exception):
    """Raised by a handler that stopped because `job.cancel_requested` was set."""


@dataclass
class Job:
    """What a handler gets: the claimed record and the signals the heartbeat raises."""

    client: Client
    host: str
    queue: str
    worker: str
    task: dict[str, Any]
    cancel_requested: threading.Event = field(default_factory=threading.Event)
    lease_lost: threading.Event = field(default_factory=threading.Event)

    @property
    def id(self) -> str:
        return str(self.task["id"])

    @property
    def attempt(self) -> int:
        return int(self.task["attempts"])

    @property
    def item(self) -> Any:
        return self.task.get("item")

    def progress(self, progress: dict[str, Any] | None = None) -> None:
        """Record progress (or only extend the lease); notes a cancel request or a lost lease."""
        try:
            answer = self.client.progress(
                self.host, self.queue, self.id, self.worker, self.attempt, progress
            )
        except ApiError as exc:
            if exc.code != "lease_lost":
                raise
            self.lease_lost.set()
            return
        if answer.get("cancelRequested"):
            self.cancel_requested.set()
        if isinstance(answer.get("lease"), dict):
            self.task["lease"] = answer["lease"]

    def lease_left(self) -> float | None:
        """Seconds until the lease the server last reported ends (None when it did not say)."""
        lease = self.task.get("lease")
        until = lease.get("until") if isinstance(lease, dict) else None
        return until / 1000 - time.time() if isinstance(until, int | float) else None


Handler = Callable[[Job], Any]


def run_worker(
    client: Client,
    host: str,
    queue: str,
    worker: str,
    handler: Handler,
    *,
    lease: int = 60,
    wait: int = CLAIM_WAIT_SECONDS,
    stop_event: threading.Event | None = None,
    max_tasks: int | None = None,
) -> int:
    """Claim and handle tasks until `stop_event` is set (or `max_tasks` are done).

    The handler returns the result (a JSON object) or raises: `Retry` asks for a retry,
    `Cancelled` (or any exception once a cancel was requested) reports the task cancelled,
    anything else fails it with the exception's text. Returns the number of tasks handled.
    """
    stop = stop_event or threading.Event()
    handled = 0
    while not stop.is_set() and (max_tasks is None or handled < max_tasks):
        try:
            task = client.claim(host, queue, worker, wait=wait, lease=lease)
        except (ApiError, OSError) as exc:
            log.warning("claim on %s/%s failed: %s", host, queue, exc)
            stop.wait(ERROR_PAUSE_SECONDS)
            continue
        if not isinstance(task, dict):
            continue  # nothing within `wait`
        handle(Job(client, host, queue, worker, task), handler, lease=lease)
        handled += 1
    return handled


def handle(job: Job, handler: Handler, *, lease: int) -> None:
    """Run one job with a heartbeat every lease/3, then report what came of it."""
    done = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(job, done, max(lease / 3, 0.2)), daemon=True)
    beat.start()
    try:
        outcome = _run(job, handler)
    finally:
        done.set()
        beat.join()
    if job.lease_lost.is_set():
        log.warning("task %s: lease lost, its outcome is dropped (another worker has it)", job.id)
        return
    kind, body = outcome
    try:
        if kind == "result":
            job.client.result(job.host, job.queue, job.id, job.worker, job.attempt, body)
        else:
            job.client.fail(job.host, job.queue, job.id, job.worker, job.attempt, body,
                            retry=kind == "retry", cancelled=kind == "cancelled")  # fmt: skip
    except ApiError as exc:
        if exc.code != "lease_lost":
            raise
        log.warning("task %s: lease lost before its %s was reported", job.id, kind)


def _run(job: Job, handler: Handler) -> tuple[str, Any]:
    try:
        result = handler(job)
    except Retry as exc:
        return "retry", _error_body(exc)
    except Exception as exc:  # any handler failure is the task's failure, not the worker's
        if isinstance(exc, Cancelled) or job.cancel_requested.is_set():
            return "cancelled", _error_body(exc)
        log.info("task %s failed: %s", job.id, "".join(traceback.format_exception(exc)))
        return "failed", _error_body(exc)
    # api.md's result is a JSON object; a handler with nothing to say still finishes the task.
    return "result", {} if result is None else result


def _error_body(exc: BaseException) -> dict[str, str]:
    return {"error": str(exc) or type(exc).__name__, "type": type(exc).__name__}


def _heartbeat(job: Job, done: threading.Event, interval: float) -> None:
    """Extend the lease until the handler ends; stop quietly once the lease is lost.

    The server says when the lease ends; if that is sooner than lease/3 away (a server that
    extends by the queue's lease rather than the claim's), the next beat comes sooner.
    """
    while not done.wait(_next_beat(job, interval)):
        try:
            job.progress()
        except (ApiError, OSError) as exc:
            log.warning("task %s: heartbeat failed: %s", job.id, exc)  # the next one may pass
        if job.lease_lost.is_set():
            return


def _next_beat(job: Job, interval: float) -> float:
    left = job.lease_left()
    return interval if left is None else max(min(interval, left / 3), 0.2)
