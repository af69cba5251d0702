"""A worker loop: claim (waiting), heartbeat while the handler runs, report the outcome, and
claim the next task in the report's own request (api.md's `next`)."""

from __future__ import annotations

import logging
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import tracing
from .backoff import CONNECTION_ERRORS, with_backoff
from .client import ApiError, Client

log = logging.getLogger("taskhoster.worker")

CLAIM_WAIT_SECONDS = 20  # a waiting claim returns as soon as a task is posted
# The most a worker waits between claims while the server does not answer (a restart): it is
# back at work within this of the server answering again, for a refused connection a try costs.
RECONNECT_PAUSE_SECONDS = 1.5
REPORT_TRIES = 6  # a result or failure that met a transient error is sent again (replay-safe)
# What a failure body keeps of a handler's exception: enough to find the bug, and far below
# the smallest item cap an operator is likely to set (the server refuses a larger body).
ERROR_CHARS = 1000
TRACEBACK_LINES = 20
TRACEBACK_CHARS = 4000


class Retry(Exception):
    """Raised by a handler: fail this attempt and let the queue retry it after the backoff."""


class Fail(Exception):
    """Raised by a handler: fail the task for good, whatever attempts its budget has left
    (bad input that no retry will mend)."""


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
    # Set when the worker is leaving without waiting: the outcome is not reported, the lease
    # runs out and the sweep puts the task back.
    abandoned: threading.Event = field(default_factory=threading.Event)

    @property
    def id(self) -> str:
        return str(self.task["id"])

    @property
    def attempt(self) -> int:
        return int(self.task["attempts"])

    @property
    def max_attempts(self) -> int:
        """The task's attempt budget (0: none, so a failure is not retried)."""
        return int(self.task.get("maxAttempts") or 0)

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
    concurrency: int = 1,
    abandon_event: threading.Event | None = None,
    batch: bool | None = None,
) -> int:
    """Claim and handle tasks until `stop_event` is set (or `max_tasks` are claimed).

    Up to `concurrency` handlers run at once, each in a thread of its own with its own
    heartbeat; a claim asks for as many tasks as there are free slots (`max`), so a pool
    takes several tasks per request. Once `stop_event` is set the loop claims no more and
    waits for the running handlers to end; once `abandon_event` is set it stops waiting, and
    their outcomes are not reported: their leases run out and the sweep puts them back.

    The handler returns the result (a JSON value) or raises: `Cancelled` (or anything raised
    once a cancel was requested, `Retry` included) reports the task cancelled, `Retry` asks for
    a retry, `Fail` fails the task for good, and any other exception (`SystemExit` too: only
    `KeyboardInterrupt` passes through) is logged and retried after the queue's backoff while
    the task's attempt budget lasts, then fails it with the exception's text and the last
    lines of its traceback. Returns the number of tasks handled (or left running, when
    abandoned).

    Each report claims the next task of its handler's slot in the same request (`next`), so a
    task costs two requests, its post and its report, while the queue has work; a report that
    brings no task back frees its slot, and the loop's own waiting claim fills it. `max_tasks`
    counts these claims too.

    With `batch` (the default once `concurrency` is above 1), the outcomes of handlers that end
    together are reported together: one batch finish (POST .../finish) takes every outcome
    that queued while the previous one was in flight, so a quick pool drains up to 100 tasks
    in two requests, while a lone outcome is never held back to wait for company. A cancelled
    task is still reported on its own. `batch=False` reports each outcome alone; with
    `concurrency=1` only one outcome is ever waiting, so a quick handler runs best with a high
    `concurrency` (up to 100 tasks per claim and per report).

    A claim refused for good (a wrong token, a queue that does not exist or is not yours:
    401, 403, 404) raises `ApiError`, since no later claim can do better; connection errors,
    429 and 5xx answers are retried on backoff.py's schedule until `stop_event` is set.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
    stop = stop_event or threading.Event()
    abandon = abandon_event or threading.Event()
    pool = _Pool(concurrency)
    budget = _Budget(max_tasks, stop, abandon)
    reporter = _Reporter(client, host, queue, worker, budget, lease) if (
        concurrency > 1 if batch is None else batch
    ) else None  # fmt: skip
    paused, answered = False, False
    # Set while claims fail: the claim that finds the server again does not wait, so it says so
    # at once (a waiting claim on an empty queue would answer only after its wait).
    reconnecting = threading.Event()

    def back(seconds: float) -> None:
        reconnecting.clear()
        if answered:
            log.info("reconnected to %s after %.0f s: claiming from %s/%s again",
                     client.base_url, seconds, host, queue,
                     extra={"event": "reconnected", "worker": worker})  # fmt: skip

    def work(job: Job) -> None:
        """Handle the job, then each next task its report claimed, in this slot."""
        while True:
            task = handle(job, handler, lease=lease, reporter=reporter, budget=budget)
            if task is None:
                return
            job = Job(client, host, queue, worker, task, abandoned=abandon)
            pool.follow(job)

    try:
        while not stop.is_set() and not budget.spent():
            free = pool.wait_for_a_slot(stop)
            if not free:
                continue
            want = budget.reserve(free)
            if not want:  # the rest of max_tasks is reserved by reports claiming their next
                pool.wait_for_a_change()
                continue
            answer = None
            try:
                # The first claim does not wait: the banner says at once that the server and
                # the token are good (or the refusal ends the loop at once). A claim whose
                # answer was lost is sent again: the task it took comes back when its lease ends.
                answer = with_backoff(
                    lambda want=want, waits=wait if answered else 0: client.claim_answer(
                        host, queue, worker, wait=0 if reconnecting.is_set() else waits,
                        lease=lease, max=want if want > 1 else None),
                    tries=None, repeatable=True, stop=stop, after_failure=reconnecting.set,
                    most=RECONNECT_PAUSE_SECONDS, recovered=back,
                    say=lambda line: log.warning("claim on %s/%s failed: %s", host, queue, line),
                )  # fmt: skip
            except (ApiError, *CONNECTION_ERRORS):
                if stop.is_set():  # stopped while waiting to claim again
                    continue
                raise
            finally:
                budget.settle(want, len(answer.tasks) if answer is not None else 0)
            if not answered:  # said once the server took a claim: the worker is at work
                answered = True
                log.info("worker %s ready: %s/%s at %s, concurrency %d", worker, host, queue,
                         client.base_url, concurrency,
                         extra={"event": "ready", "worker": worker})  # fmt: skip
            if answer.paused != paused:  # said once when it changes, not on every claim
                paused = answer.paused
                log.info("queue %s/%s %s", host, queue,
                         "paused: waiting for it to resume" if paused else "resumed")  # fmt: skip
            for task in answer.tasks:
                job = Job(client, host, queue, worker, task, abandoned=abandon)
                pool.start(lambda job=job: work(job), job)
    finally:
        pool.wait_all(abandon)
        for job in pool.jobs():  # left running: say which come back, and when
            _say_left(job)
    return budget.claimed


class _Budget:
    """How many more tasks the loop may claim (`max_tasks`, none once stopped), shared by its
    own claims and its reports' next claims: each reserves what it asks for, then settles for
    what came, so that together they never claim past `max_tasks`."""

    def __init__(self, most: int | None, stop: threading.Event, abandon: threading.Event) -> None:
        self.most, self.stop, self.abandon = most, stop, abandon
        self.claimed = 0
        self._reserved = 0
        self._lock = threading.Lock()

    def spent(self) -> bool:
        return self.most is not None and self.claimed >= self.most

    def reserve(self, wanted: int) -> int:
        """Up to `wanted` claims, kept for the caller until it settles (0: none may be made)."""
        with self._lock:
            if self.stop.is_set() or self.abandon.is_set():
                return 0
            left = wanted if self.most is None else self.most - self.claimed - self._reserved
            granted = max(min(wanted, left), 0)
            self._reserved += granted
            return granted

    def settle(self, reserved: int, took: int) -> None:
        with self._lock:
            self._reserved -= reserved
            self.claimed += took

    def next_claim(self, wanted: int, lease: int) -> tuple[int, dict[str, Any] | None]:
        """A reservation for a report's `next`, and the `next` to send (None: ask for none)."""
        granted = self.reserve(wanted)
        return granted, ({"max": granted, "lease": lease} if granted else None)


def _say_left(job: Job) -> None:
    """A task the worker leaves running: the API has no way to hand it back uncounted, so
    its lease runs out and the sweep puts it back; say when."""
    left = job.lease_left()
    if left is None:
        text = "left running: when its lease ends, the sweep puts it back to pending"
    else:
        until = time.strftime("%H:%M:%S UTC", time.gmtime(time.time() + left))
        text = f"left running: its lease ends at {until}, then the sweep puts it back to pending"
    _say(job, "abandoned", text, logging.WARNING)


class _Pool:
    """The running handlers' threads, and a condition that says when one ended."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.running: set[threading.Thread] = set()
        self.job_of: dict[threading.Thread, Job] = {}
        self.changed = threading.Condition()

    def wait_for_a_slot(self, stop: threading.Event) -> int:
        """Free slots, once there is one (0 when `stop` was set meanwhile)."""
        with self.changed:
            while len(self.running) >= self.size and not stop.is_set():
                self.changed.wait(0.5)  # a stop is noticed within half a second
            return 0 if stop.is_set() else self.size - len(self.running)

    def wait_for_a_change(self) -> None:
        """Until a handler's slot ends (or half a second, to notice a stop)."""
        with self.changed:
            self.changed.wait(0.5)

    def follow(self, job: Job) -> None:
        """The calling handler's thread has gone on to `job` (its report claimed it)."""
        with self.changed:
            self.job_of[threading.current_thread()] = job

    def jobs(self) -> list[Job]:
        """The jobs whose handlers are still running."""
        with self.changed:
            return [self.job_of[thread] for thread in self.running if thread in self.job_of]

    def start(self, work: Callable[[], None], job: Job | None = None) -> None:
        def run() -> None:
            try:
                work()
            except Exception:  # a report that could not be sent: the lease brings it back
                log.exception("a task's outcome could not be reported")
            finally:
                with self.changed:
                    self.running.discard(thread)
                    self.job_of.pop(thread, None)
                    self.changed.notify_all()

        thread = threading.Thread(target=run, daemon=True)
        with self.changed:
            self.running.add(thread)
            if job is not None:
                self.job_of[thread] = job
        thread.start()

    def wait_all(self, abandon: threading.Event) -> None:
        with self.changed:
            while self.running and not abandon.is_set():
                self.changed.wait(0.5)


def handle(
    job: Job,
    handler: Handler,
    *,
    lease: int,
    reporter: _Reporter | None = None,
    budget: _Budget | None = None,
) -> dict[str, Any] | None:
    """Run one job with a heartbeat every lease/3, then report what came of it (through the
    reporter's batches when there is one), and log one line for its start and one for its end.

    With a `budget` the report claims the slot's next task (`next`) while the budget allows:
    answers that task's record, or None."""
    _say(job, "received", f"received (attempt {_attempt_of(job.attempt, job.max_attempts)})")
    started = time.monotonic()
    done = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(job, done, max(lease / 3, 0.2)), daemon=True)
    beat.start()
    try:
        outcome = _run(job, handler)
    finally:
        done.set()
        beat.join()
    seconds = time.monotonic() - started
    if job.lease_lost.is_set():
        _say(job, "lease_lost", "lease lost: its outcome is dropped (another worker has it)",
             logging.WARNING)  # fmt: skip
        return None
    if job.abandoned.is_set():
        _say_left(job)  # its outcome is not reported
        return None
    kind, body = outcome
    if reporter is not None and kind != "cancelled":
        view, task = _report_in_batch(job, reporter, kind, body)
        if view is not None:
            _say_outcome(job, kind, body, view, seconds)
        return task
    reserved, claim_next = budget.next_claim(1, lease) if budget else (0, None)
    view: Any = None
    try:
        if kind == "result":
            client = job.client
            view = _with_retries(lambda: client.result(job.host, job.queue, job.id, job.worker,
                                                       job.attempt, body,
                                                       claim_next=claim_next))  # fmt: skip
        else:
            view = _report_failure(job, kind, body, claim_next)
    except ApiError as exc:
        if exc.code == "payload_too_large" and kind == "result":
            # Left unreported, the task would run again after its lease for the same outcome.
            log.warning("task %s: its result is over the queue's cap; failing it", job.id)
            too_large = {"error": exc.detail, "type": "ResultTooLarge"}
            _say_outcome(job, "failed", too_large, _report_failure(job, "failed", too_large),
                         seconds)  # fmt: skip
            return None
        if exc.code != "lease_lost":
            raise
        _say(job, "lease_lost", f"lease lost before its {kind} was reported", logging.WARNING)
        return None
    finally:
        claimed = _next_tasks(view)
        if budget is not None:
            budget.settle(reserved, len(claimed))
    _say_outcome(job, kind, body, view, seconds)
    return claimed[0] if claimed else None


def _next_tasks(answer: Any) -> list[dict[str, Any]]:
    """The records a report's `next` claimed (none from a server that predates `next`)."""
    found = answer.get("next") if isinstance(answer, dict) else None
    return [task for task in found if isinstance(task, dict)] if isinstance(found, list) else []


def _say(job: Job, event: str, text: str, level: int = logging.INFO, **fields: Any) -> None:
    """One line about one task; `event` and the fields travel as the record's extras, for a
    JSON log's readers."""
    log.log(level, "task %s %s", job.id, text,
            extra={"event": event, "task": job.id, "attempt": job.attempt, **fields})  # fmt: skip


def _say_outcome(job: Job, kind: str, body: Any, view: Any, seconds: float) -> None:
    """The line for an attempt's end: what came of it, and for a retry when it runs again."""
    took = f"in {seconds:.2f} s"
    if kind == "result":
        _say(job, "succeeded", f"succeeded {took}", seconds=round(seconds, 3))
        return
    if kind == "cancelled":
        _say(job, "cancelled", f"cancelled after {seconds:.2f} s", seconds=round(seconds, 3))
        return
    reason = failure_summary(body)
    view = view if isinstance(view, dict) else {}
    if kind == "retry" and view.get("status") == "pending":
        available = view.get("availableAt")
        wait = max(available / 1000 - time.time(), 0) if isinstance(available, int | float) else 0
        budget = int(view.get("maxAttempts") or job.max_attempts)
        _say(job, "retrying", f"failed {took} ({reason}); retrying in {wait:.0f} s "
             f"(attempt {_attempt_of(job.attempt + 1, budget)})", logging.WARNING,
             seconds=round(seconds, 3), error=reason, retry_in=round(wait, 3))  # fmt: skip
        return
    last = " on its last attempt" if kind == "retry" else ""
    _say(job, "failed", f"failed {took}{last} ({reason})", logging.WARNING,
         seconds=round(seconds, 3), error=reason)  # fmt: skip


def _attempt_of(attempt: int, budget: int) -> str:
    return f"{attempt} of {budget}" if budget else str(attempt)


def failure_summary(body: Any) -> str:
    """A failure body in a few words: a command's exit status and the last line of its
    standard error (the command line's body), else the first line of its error."""
    if not isinstance(body, dict):
        return "no details"
    code, stderr = body.get("exitCode"), str(body.get("stderr") or "")
    if isinstance(code, int):
        lines = stderr.strip().splitlines()
        how = f"exit {code}" if code >= 0 else _signal_words(-code)
        return _clip(f"{how}: {lines[-1]}" if lines else how, 200)
    error = str(body.get("error") or "no details").strip().splitlines()
    return _clip(error[0] if error else "no details", 200)


def _signal_words(number: int) -> str:
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"killed by signal {number}"


# the worker's outcome kinds as a batch finish names them ("cancelled" is always sent alone)
BATCH_OUTCOMES = {"result": "result", "failed": "fail", "retry": "retry"}


def _report_in_batch(
    job: Job, reporter: _Reporter, kind: str, body: Any
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Report through the batch, and deal with this entry's answer as the single report's
    refusal would be dealt with; answers the task's status view (None once it was logged),
    and the next task the batch claimed for this slot (whatever became of this entry)."""
    answer, task = reporter.send(job, kind, body)
    if answer.get("status") == 200:
        return dict(answer.get("task") or {}), task
    code = answer.get("code")
    if code == "lease_lost":
        _say(job, "lease_lost", f"lease lost before its {kind} was reported", logging.WARNING)
        return None, task
    if code == "payload_too_large":
        if kind == "result":  # left unreported, it would run again for the same outcome
            log.warning("task %s: its result is over the queue's cap; failing it", job.id)
            too_large = {"error": str(answer.get("detail")), "type": "ResultTooLarge"}
            _say_outcome(job, "failed", too_large, _report_failure(job, "failed", too_large), 0)
            return None, task
        return _report_failure(job, kind, body), task  # sent alone: reported without its body
    # a refusal the worker cannot mend: its slot's next task comes back when its lease ends
    raise ApiError(int(answer.get("status") or 500), str(code), str(answer.get("detail")))


@dataclass
class _Outcome:
    job: Job
    kind: str
    body: Any
    sent: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] = field(default_factory=dict)
    next_task: dict[str, Any] | None = None  # what the batch's `next` claimed for this slot
    error: BaseException | None = None


class _Reporter:
    """Sends the outcomes of a pool's handlers in batches, group-commit style: the handler
    that finds no batch in flight sends every outcome queued so far (its own included) and
    keeps sending what queued meanwhile; the others wait for the batch that carries theirs.
    Nothing waits for a batch to fill, so a lone outcome costs one request, as before."""

    def __init__(
        self, client: Client, host: str, queue: str, worker: str, budget: _Budget, lease: int
    ) -> None:
        self.client, self.host, self.queue, self.worker = client, host, queue, worker
        self.budget, self.lease = budget, lease
        self._lock = threading.Lock()
        self._queued: list[_Outcome] = []
        self._sending = False

    def send(self, job: Job, kind: str, body: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """This outcome's answer, once the batch that carried it was answered, and the next
        task the batch claimed for this outcome's slot."""
        mine = _Outcome(job, kind, body)
        with self._lock:
            self._queued.append(mine)
            leader = not self._sending
            self._sending = True
        if leader:
            while True:
                with self._lock:
                    batch, self._queued = self._queued[:100], self._queued[100:]
                    if not batch:
                        self._sending = False
                        break
                self._send(batch)
        mine.sent.wait()
        if mine.error is not None:
            raise mine.error
        return mine.answer, mine.next_task

    def _send(self, batch: list[_Outcome]) -> None:
        entries = []
        for outcome in batch:
            entry = {"id": outcome.job.id, "attempt": outcome.job.attempt,
                     "outcome": BATCH_OUTCOMES[outcome.kind]}  # fmt: skip
            if outcome.body is not None:
                entry["result"] = outcome.body
            entries.append(entry)
        # one next task for each slot the batch frees, while the loop's budget allows
        reserved, claim_next = self.budget.next_claim(len(batch), self.lease)
        whole: dict[str, Any] = {}
        try:
            whole = _with_retries(lambda: self.client.finish_many_answer(
                self.host, self.queue, self.worker, entries, claim_next=claim_next))  # fmt: skip
        except Exception as exc:  # each waiting handler raises it, as a single report would
            for outcome in batch:
                outcome.error = exc
        else:
            claimed = _next_tasks(whole)
            for outcome, answer in zip(batch, whole["outcomes"], strict=True):
                outcome.answer = answer
            for outcome, task in zip(batch, claimed, strict=False):
                outcome.next_task = task
        finally:
            self.budget.settle(reserved, len(_next_tasks(whole)))
            for outcome in batch:
                outcome.sent.set()


def _report_failure(
    job: Job, kind: str, body: dict[str, str], claim_next: dict[str, Any] | None = None
) -> Any:
    """Report a failure; answers the server's status view of the task (with `claim_next`, and
    the tasks it claimed in "next")."""

    def fail(result: dict[str, str] | None) -> Any:
        return _with_retries(lambda: job.client.fail(job.host, job.queue, job.id, job.worker,
                                                     job.attempt, result, retry=kind == "retry",
                                                     cancelled=kind == "cancelled",
                                                     claim_next=claim_next))  # fmt: skip

    try:
        return fail(body)
    except ApiError as exc:
        if exc.code != "payload_too_large":
            raise
        # A queue whose item cap is smaller than the body: the outcome still has to arrive.
        log.warning("task %s: its failure body is over the queue's cap; reported without it",
                    job.id)  # fmt: skip
        return fail(None)


def _with_retries(report: Callable[[], Any]) -> Any:
    """Send a result or failure, again after a transient error (backoff.py): the server answers
    a repeated report from the same attempt as a replay and changes nothing, so a report whose
    answer was lost may safely be sent twice."""
    return with_backoff(report, tries=REPORT_TRIES, repeatable=True,
                        say=lambda line: log.warning("report failed: %s", line))  # fmt: skip


def _run(job: Job, handler: Handler) -> tuple[str, Any]:
    try:
        with tracing.processing(job.host, job.queue, job.task, job.worker):
            result = handler(job)
    except KeyboardInterrupt:  # the operator's own interrupt ends the worker, not the task
        raise
    # Any other handler failure is the task's, not the worker's: SystemExit too (a handler
    # that calls sys.exit must not end the pool's thread with nothing reported).
    except BaseException as exc:
        # Checked first: once a cancel was asked, whatever the handler raised (a Retry too)
        # ends the task cancelled, as cancelling it promised.
        if isinstance(exc, Cancelled) or job.cancel_requested.is_set():
            return "cancelled", _error_body(exc)
        if isinstance(exc, Retry):
            return "retry", _error_body(exc)
        if isinstance(exc, Fail):  # its line is the outcome's, once reported
            return "failed", _error_body(exc)
        return _handler_error(job, exc)
    # api.md's result is a JSON object; a handler with nothing to say still finishes the task.
    return "result", {} if result is None else result


def _handler_error(job: Job, exc: BaseException) -> tuple[str, dict[str, str]]:
    """An unexpected exception: retried while the budget lasts (the server counts it), logged
    with its traceback (the outcome's own line follows once it is reported), and its last lines
    kept in the failure body for whoever reads it."""
    log.warning("task %s raised on attempt %s", job.id, job.attempt, exc_info=exc,
                extra={"event": "raised", "task": job.id, "attempt": job.attempt})  # fmt: skip
    body = {**_error_body(exc), "traceback": _traceback_tail(exc)}
    return ("retry" if job.max_attempts else "failed"), body


def _error_body(exc: BaseException) -> dict[str, Any]:
    # An exception may name its kind for people (`kind`): the command line's failure is one
    # kind whether or not it was to be retried, and "CommandRetry" on a final failure misled.
    name = getattr(exc, "kind", None) or type(exc).__name__
    if isinstance(exc, Retry | Fail | Cancelled):
        text = str(exc) or name  # the handler's own words
    else:
        text = f"{name}: {exc}" if str(exc) else name
    body = {"error": _clip(text, ERROR_CHARS), "type": name}
    # A handler's own exception may carry more to report (the command line: the exit code and
    # the tail of standard error).
    details = getattr(exc, "details", None)
    return {**body, **details} if isinstance(details, dict) else body


def _traceback_tail(exc: BaseException) -> str:
    lines = "".join(traceback.format_exception(exc)).rstrip("\n").splitlines()
    tail = "\n".join(lines[-TRACEBACK_LINES:])
    return tail if len(tail) <= TRACEBACK_CHARS else "..." + tail[-TRACEBACK_CHARS:]


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


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
