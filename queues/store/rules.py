"""The store's rules on one record, with no storage in them: what a post makes, what a claim,
a report, an operator's verb or the sweep makes of a task as read. Both stores (the file store
here, the PostgreSQL store in queues/store_pg) call these, so a rule lives in one place; each
store only reads the record under its own lock and writes what these return.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import names, paths, posting, trace_context
from .batch import OnComplete, PostEntry, Report
from .errors import (
    DependencyFailed,
    InvalidName,
    InvalidRequest,
    LeaseLost,
    NotCancellable,
    NotFound,
    NotRequeueable,
    NotRetryable,
    NotWaiting,
    out_of_range,
)
from .eventlog import NO_REASON, Because
from .ids import new_task_id
from .records import Lease, State, Task
from .results import GroupCounts, Reported
from .settings import QueueSettings


@dataclass(frozen=True)
class Change:
    """One task's change: its record as read under its lock (`old`, in the directory `source`;
    the PostgreSQL store passes the directory its status maps to), the record to write, the
    event to log, the bodies to archive, and why (the line's optional fields)."""

    source: str
    old: Task
    new: Task
    event: str | None
    archive: dict[str, Any] = field(default_factory=dict)
    because: Because = NO_REASON


# -- posts ----------------------------------------------------------------------------------


def new_task(
    host: str,
    queue: str,
    entry: PostEntry,
    *,
    settings: QueueSettings,
    posted_by: str | None,
    now: int,
    reposted_from: str | None = None,
    group: str | None = None,
) -> Task:
    """A checked entry as the pending record it becomes (nothing written yet); `group` was
    checked by check_group."""
    posting.check_item(entry.item, settings)
    posting.check_options(settings, entry.priority, entry.delay_seconds, entry.idempotency_key)
    after = check_after(queue, entry.after, entry.on_dependency_failure)
    posting.check_concurrency_key(entry.concurrency_key)
    return Task.of(
        id=new_task_id(),
        host=paths.validate_host(host),
        queue=paths.validate_queue(queue),
        status=State.PENDING,
        item=entry.item,
        posted_by=posted_by,
        posted_at=now,
        updated_at=now,
        rev=1,
        priority=entry.priority,
        available_at=now + entry.delay_seconds * 1000 if entry.delay_seconds else 0,
        max_attempts=settings.attempt_budget(),
        idempotency_key=entry.idempotency_key,
        reposted_from=reposted_from,
        after=after,
        waiting_for=after,
        on_dependency_failure="cancel" if entry.on_dependency_failure == "cancel" else None,
        traceparent=trace_context.current(),
        concurrency_key=entry.concurrency_key,
        group=group,
    )


# -- dependencies ---------------------------------------------------------------------------

MAX_AFTER = 100
DEPENDENCY_FAILURES = ("fail", "cancel")


def check_after(queue: str, after: Any, on_failure: Any) -> list[str] | None:
    """A post's `after` as "queue/id" references of the same host, each once, in the order
    given (None for none); InvalidRequest for anything else. A bare id is of the post's queue."""
    if on_failure is not None and on_failure not in DEPENDENCY_FAILURES:
        raise InvalidRequest('onDependencyFailure must be "fail" or "cancel".')
    if after is None or (isinstance(after, list | tuple) and not after):
        if on_failure is not None:
            raise InvalidRequest("onDependencyFailure needs after.")
        return None
    if not isinstance(after, list | tuple) or len(after) > MAX_AFTER:
        raise InvalidRequest(f"after must be a list of at most {MAX_AFTER} task ids.")
    refs: list[str] = []
    for value in after:
        if not isinstance(value, str):
            raise InvalidRequest("after holds task ids, each a string (id or queue/id).")
        dep_queue, _, dep_id = value.rpartition("/")
        ref = f"{dep_queue or queue}/{dep_id}"
        try:
            paths.validate_queue(dep_queue or queue)
            paths.validate_task_id(dep_id)
        except (InvalidName, NotFound) as exc:
            raise InvalidRequest(f"after: {value!r} is not a task id (id or queue/id).") from exc
        if ref not in refs:
            refs.append(ref)
    return refs


def split_ref(ref: str) -> tuple[str, str]:
    """A "queue/id" reference as (queue, id)."""
    queue, _, task_id = ref.partition("/")
    return queue, task_id


def plan_release(
    task: Task, source: str, dependency: str, ended: State | None, *, now: int
) -> Change | None:
    """What the end of one of a waiting task's dependencies (`ended`: its status, or None for a
    task that is gone) makes of it: finished, one fewer to wait for (the last: `released`, and
    its queue timeout starts now); anything else, the task ends failed (dependency_failed,
    naming it) or cancelled, as its post asked. None when it no longer waits for it."""
    if not task.waiting or dependency not in (task.waiting_for or ()):
        return None
    if ended is State.FINISHED:
        rest = [ref for ref in task.waiting_for or () if ref != dependency]
        if rest:
            return Change(source, task, task.replace(waiting_for=rest, updated_at=now), None)
        new = task.replace(waiting_for=None, released_at=now, updated_at=now)
        return Change(source, task, new, "released")
    ending = {"waiting_for": None, "failed_dependency": dependency, "updated_at": now,
              "finished_at": now}  # fmt: skip
    if task.on_dependency_failure == "cancel":
        return Change(source, task, task.replace(status=State.CANCELLED, **ending), "cancelled")
    new = task.replace(status=State.FAILED, error="dependency_failed", **ending)
    return Change(source, task, new, "failed", {"error": "dependency_failed"})


def retry_waits_for(task: Task, dependencies: Mapping[str, State | None]) -> list[str] | None:
    """What a retried task waits for: the dependencies of its post that have not finished yet
    (None: none, it runs as soon as it is claimed). One that failed, timed out or was cancelled
    refuses the retry (DependencyFailed, naming it): the task is to run after it, so that one
    is retried first, and this one then waits for it. One that is gone (cleaned, deleted)
    refuses it too, since nothing would ever release the task.

    A task that was released or claimed once saw every dependency finish, and a finished task
    stays finished until it is gone: it waits for nothing, whatever is left of them."""
    if task.released_at is not None or task.attempts > 0:
        return None
    waiting: list[str] = []
    for ref in task.after or ():
        status = dependencies[ref]
        if status is None or status in (State.FAILED, State.CANCELLED):
            raise DependencyFailed(ref, status.value if status is not None else None)
        if status is not State.FINISHED:
            waiting.append(ref)
    return waiting or None


# -- groups ---------------------------------------------------------------------------------

# a member whose post registered it but never wrote it (a crash, or a refused write) counts as
# "gone" once this long has passed since its post (the sweep's recount: groups.py)
GROUP_GONE_MS = 60_000
# the callback's item names at most this many members that did not finish (a group of 10,000
# failed members would not fit a task's item); `unfinishedCount` says how many there were
MAX_UNFINISHED_IDS = 1000


def check_group(group: Any, on_complete: OnComplete | None, host: str) -> str | None:
    """A post's `group` (a name like a queue's) and `onComplete` (a queue of the same host,
    and an item its settings take), checked; InvalidRequest for anything else."""
    if group is None:
        if on_complete is not None:
            raise InvalidRequest("onComplete needs group.")
        return None
    if not isinstance(group, str):
        raise InvalidRequest("group must be a string.")
    try:
        paths.validate_queue(group)
    except InvalidName as exc:
        raise InvalidRequest(
            "group must be 1 to 64 characters of a-z, 0-9, '_' and '-', starting with a"
            " letter or digit."
        ) from exc
    if on_complete is not None:
        try:
            paths.validate_queue(on_complete.queue)
        except InvalidName as exc:
            raise InvalidRequest("onComplete.queue is not a queue name.") from exc
        if not isinstance(on_complete.item, dict):
            raise InvalidRequest("onComplete.item must be a JSON object.")
        posting.check_item(on_complete.item, on_complete.settings)
    return group


def closing_record(on_complete: OnComplete, posted_by: str | None) -> dict[str, Any]:
    """What a group keeps of the post that closed it: its callback, and who posted it."""
    return {
        "queue": on_complete.queue,
        "item": on_complete.item,
        "settings": dataclasses.asdict(on_complete.settings),
        "postedBy": posted_by,
    }


def closing_of(record: dict[str, Any]) -> tuple[OnComplete, str | None]:
    """closing_record's record read back: the callback, and who posted the closing post."""
    settings = QueueSettings(**record["settings"])
    on_complete = OnComplete(queue=record["queue"], item=record["item"], settings=settings)
    return on_complete, record["postedBy"]


def group_state(counts: GroupCounts, *, closed: bool, called_back: bool) -> str:
    """open (it takes more members), closed (its last members are running), complete (every
    member ended: the callback is due), called_back (the callback was posted)."""
    if called_back:
        return "called_back"
    if not closed:
        return "open"
    return "complete" if counts.ended >= counts.posted else "closed"


def callback_key(queue: str, group: str) -> str:
    """The Idempotency-Key of a group's callback post: two enders or two sweeps that both see
    the group complete post one task."""
    return f"group:{queue}/{group}"


def group_callback(
    host: str,
    queue: str,
    group: str,
    on_complete: OnComplete,
    counts: GroupCounts,
    unfinished: list[str],
    *,
    posted_by: str | None,
    now: int,
) -> Task:
    """The callback task of a complete group: onComplete's item with the outcome under
    "group". Not checked against the callback queue's size cap or schema again (the closing
    post checked its item): a refused callback would leave the group without one."""
    outcome = {
        "id": group,
        "queue": queue,
        "total": counts.posted,
        "counts": counts.outcomes(),
        "unfinished": unfinished[:MAX_UNFINISHED_IDS],
        "unfinishedCount": len(unfinished),
    }
    item = {**on_complete.item, "group": outcome}
    return Task.of(
        id=new_task_id(),
        host=host,
        queue=on_complete.queue,
        status=State.PENDING,
        item=item,
        posted_by=posted_by,
        posted_at=now,
        updated_at=now,
        rev=1,
        max_attempts=on_complete.settings.attempt_budget(),
        idempotency_key=callback_key(queue, group),
    )


# -- claims and workers' reports ------------------------------------------------------------


def checked_lease_ms(settings: QueueSettings, lease_seconds: int | None) -> int:
    seconds = settings.lease_seconds if lease_seconds is None else lease_seconds
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int)
        or not 1 <= seconds <= settings.queue_seconds
    ):
        raise out_of_range("lease", seconds, 1, settings.queue_seconds, unit="seconds")
    return seconds * 1000


MAX_WORKER = 200  # characters


def check_worker(worker: Any) -> str:
    """A claim's worker name, by the one rule for names (names.py)."""
    return names.check_name("worker", worker, most=MAX_WORKER)


def check_max_tasks(max_tasks: Any) -> None:
    if isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or not 1 <= max_tasks <= 100:
        raise out_of_range("max", max_tasks, 1, 100)


def claimed(task: Task, *, worker: str, lease_ms: int, now: int) -> Task:
    """A pending task as the claim's new attempt holds it."""
    return task.replace(
        status=State.PROCESSING,
        attempts=task.attempts + 1,
        lease=Lease(worker=worker, until=now + lease_ms),
        lease_seconds=lease_ms // 1000,
        updated_at=now,
        claimed_at=now,
        ended_by=None,  # a new attempt: the last one's report can no longer be replayed
    )


# How often a waiting claim whose caller may leave (a client's connection) looks whether it
# still wants the claim, when nothing else wakes it.
STILL_WANTED_SECONDS = 1.0


def plan_unclaim(task: Task, source: str, worker: str, attempt: int, *, now: int) -> Change:
    """A claim whose caller left before it heard of it, given back by the server that took it:
    the attempt never began, so the task is pending again with the attempts it had before
    (`unclaimed`), claimable at once; with a cancel requested meanwhile it is cancelled, as a
    pending task would have been. Fenced as a report: only the claim's worker and attempt."""
    held(task, worker, attempt)
    back = {"lease": None, "attempts": task.attempts - 1, "updated_at": now}
    if task.cancel_requested:
        new = task.replace(status=State.CANCELLED, finished_at=now, **back)
        return Change(source, task, new, "cancelled")
    return Change(source, task, task.replace(status=State.PENDING, **back), "unclaimed")


def claim_stamp(task: Task, now: int, *, live: bool) -> int:
    """The time a claim's new attempt begins: on the live clock, never before the record's
    last change. A claim that read the clock and then waited behind the sweep's requeue of
    this task (its lock, an index, a row's commit) must not begin its attempt before the
    requeue that ended the last one, on the record or in the event log. A time the caller
    gave (a test's, a replay's) is taken as it is."""
    return max(now, task.updated_at) if live else now


def claimed_ms(task: Task, settings: QueueSettings) -> int:
    """The claim's own lease length; the queue's for a record written before it was kept.

    Clamped to the queue timeout, which an admin may have lowered since the claim."""
    seconds = task.lease_seconds or settings.lease_seconds
    return min(seconds, settings.queue_seconds) * 1000


def held(task: Task, worker: str, attempt: int) -> None:
    """Fencing: only the worker and attempt the claim named may change a processing task."""
    lease = task.lease
    if (
        task.status is not State.PROCESSING
        or lease is None
        or lease.worker != worker
        or task.attempts != attempt
    ):
        raise LeaseLost()


def _same(a: Any, b: Any) -> bool:
    """The same JSON: keys in any order, but 1, 1.0 and true are three different bodies."""
    return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        b, option=orjson.OPT_SORT_KEYS
    )


def _ended_by(task: Task, worker: str, attempt: int) -> bool:
    """This worker's own report ended this attempt, and nothing has changed its course since."""
    return task.ended_by == worker and task.attempts == attempt


def _finished_so(task: Task, worker: str, attempt: int, result: Any) -> bool:
    return (
        _ended_by(task, worker, attempt)
        and task.status is State.FINISHED
        and _same(task.result, result)
    )


def _failed_so(
    task: Task, worker: str, attempt: int, result: Any, *, retry: bool, cancelled: bool
) -> bool:
    """The record shows what this fail would have made of the attempt: cancelled; failed (past
    the budget, with retry); or, with retry, pending again and not yet claimed."""
    if not _ended_by(task, worker, attempt):
        return False
    if cancelled:
        return task.status is State.CANCELLED and _same(task.result, result)
    if task.status is State.FAILED:
        errors = (None, "attempts") if retry else (None,)
        return task.error in errors and _same(task.result, result)
    return retry and task.status is State.PENDING and _same(task.last_error, result)


def progressed(
    task: Task,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    progress: Any,
    lease_seconds: int | None,
    now: int,
) -> Task:
    """The held task with its lease extended (by `lease_seconds` when the call gives one, else
    by the claim's own length) and its progress, when one is given."""
    held(task, worker, attempt)
    lease_ms = (
        checked_lease_ms(settings, lease_seconds) if lease_seconds else claimed_ms(task, settings)
    )
    changes: dict[str, Any] = {
        "lease": Lease(worker=worker, until=now + lease_ms),
        "updated_at": now,
    }
    if progress is not None:
        changes["progress"] = progress
    return task.replace(**changes)


def plan_report(
    task: Task, source: str, worker: str, report: Report, *, settings: QueueSettings, now: int
) -> Change | Reported:
    if report.outcome == "result":
        return plan_finish(task, source, worker, report.attempt, report.result, now=now)
    return plan_fail(
        task, source, worker, report.attempt, report.result, retry=report.outcome == "retry",
        cancelled=False, settings=settings, now=now,
    )  # fmt: skip


def plan_finish(
    task: Task, source: str, worker: str, attempt: int, result: Any, *, now: int
) -> Change | Reported:
    """What finishing the locked task makes of it: a replay, or the change to write."""
    if _finished_so(task, worker, attempt, result):
        return Reported(task=task, replayed=True)
    held(task, worker, attempt)
    new = task.replace(
        status=State.FINISHED,
        result=result,
        lease=None,
        updated_at=now,
        finished_at=now,
        ended_by=worker,
    )
    return Change(source, task, new, "result", {"result": result})


def plan_fail(
    task: Task,
    source: str,
    worker: str,
    attempt: int,
    result: Any,
    *,
    retry: bool,
    cancelled: bool,
    settings: QueueSettings,
    now: int,
) -> Change | Reported:
    """What failing the locked task makes of it: a replay, or the change to write."""
    if _failed_so(task, worker, attempt, result, retry=retry, cancelled=cancelled):
        return Reported(task=task, replayed=True)
    held(task, worker, attempt)
    end = {"lease": None, "updated_at": now, "ended_by": worker}
    if cancelled:
        if not task.cancel_requested:
            raise InvalidRequest("Only a task whose cancel was requested can end cancelled.")
        new = task.replace(status=State.CANCELLED, result=result, finished_at=now, **end)
        event = "cancelled"
    elif (
        retry
        and not task.cancel_requested
        and (not task.max_attempts or task.attempts < task.max_attempts)
    ):
        new = task.replace(
            status=State.PENDING,
            last_error=result,
            progress=None,
            available_at=now + settings.backoff_ms(task.attempts - task.retried_after),
            requeued_at=now if task.max_attempts else task.requeued_at,
            **end,
        )
        event = "requeue"
    else:
        error = "attempts" if retry and task.max_attempts and not task.cancel_requested else None
        new = task.replace(status=State.FAILED, result=result, error=error, finished_at=now, **end)
        event = "failed"
    body = {"result": result} if result is not None else {}
    if new.error:
        body["error"] = new.error
    return Change(source, task, new, event, body)


# -- owners and operators -------------------------------------------------------------------


def plan_cancel(task: Task, source: str, *, now: int, by: str | None) -> Change | None:
    """pending -> cancelled; processing -> cancelRequested (and cancelRequestedBy, so the
    line that ends it names the operator), None when already requested; terminal ->
    NotCancellable."""
    if task.status is State.PENDING:
        new = task.replace(status=State.CANCELLED, updated_at=now, finished_at=now, ended_by=None,
                           waiting_for=None)  # fmt: skip
        return Change(source, task, new, "cancelled", because=Because(by=by))
    if task.status is State.PROCESSING:
        if task.cancel_requested:
            return None
        new = task.replace(cancel_requested=True, cancel_requested_by=by, updated_at=now)
        return Change(source, task, new, None)
    raise NotCancellable()


def plan_retry(
    task: Task,
    source: str,
    *,
    settings: QueueSettings,
    now: int,
    by: str | None,
    item: Any,
    dependencies: Mapping[str, State | None],
) -> Change:
    """failed or cancelled -> pending, with a fresh attempt budget and a fresh queue-timeout
    window (requeuedAt); `item` (already checked as a post's) replaces the task's. A task
    posted with `after` waits again for those of its dependencies that have not finished
    (`dependencies`: the status of each, None for one that is gone); see retry_waits_for."""
    if task.status not in (State.FAILED, State.CANCELLED):
        raise NotRetryable()
    waiting = retry_waits_for(task, dependencies)
    budget = settings.attempt_budget()
    new = task.replace(
        status=State.PENDING,
        item=task.item if item is None else item,
        updated_at=now,
        lease=None,
        progress=None,
        result=None,
        error=None,
        finished_at=None,
        fetched_at=None,
        cancel_requested=False,
        cancel_requested_by=None,
        available_at=0,
        max_attempts=task.attempts + budget if budget else 0,
        last_error=task.result if task.result is not None else task.error,
        requeued_at=now,
        retried_after=task.attempts,
        ended_by=None,
        waiting_for=waiting,
        released_at=None if waiting else task.released_at,
        failed_dependency=None,
    )
    return Change(
        source,
        task,
        new,
        "retried",
        {"item": item} if item is not None else {},
        Because(by=by, edited=item is not None),
    )


def plan_requeue(task: Task, source: str, *, now: int, by: str | None) -> Change:
    """An operator ends a processing task's lease now, as if it had lapsed: back to pending
    (`requeued`), unless a lapsed lease would end it (cancel requested: cancelled; past the
    budget: failed with "attempts"). Anything but processing -> NotRequeueable."""
    if task.status is not State.PROCESSING:
        raise NotRequeueable()
    because = Because(by=by)
    if task.cancel_requested:
        new = task.replace(status=State.CANCELLED, lease=None, updated_at=now, finished_at=now)
        return Change(source, task, new, "cancelled", because=because)
    if task.max_attempts and task.attempts >= task.max_attempts:
        new = task.replace(
            status=State.FAILED, error="attempts", lease=None, updated_at=now, finished_at=now
        )
        return Change(source, task, new, "failed", {"error": "attempts"}, because)
    new = task.replace(status=State.PENDING, lease=None, updated_at=now, ended_by=None)
    return Change(source, task, new, "requeued", because=because)


def plan_hasten(task: Task, source: str, *, now: int, by: str | None) -> Change:
    """An operator makes a pending task that waits out its retry's backoff or its post's delay
    claimable now (`hastened`); its attempts and budget stay as they were. A task claimable
    already, running or ended -> NotWaiting."""
    if task.status is not State.PENDING or task.available_at <= now:
        raise NotWaiting()
    new = task.replace(available_at=0, updated_at=now)
    return Change(source, task, new, "hastened", because=Because(by=by))


# -- the sweep ------------------------------------------------------------------------------


def verdict(directory: str, task: Task, settings: QueueSettings, now: int) -> str | None:
    """What the sweep's three rules make of one task with these settings at `now`, without
    changing it: "timeout" (queue timeout), "requeue" (an interrupted claim, or a lapsed lease
    with attempts left), "failed" (a lapsed lease past the budget), "cancelled" (a lapsed lease
    whose cancel was requested), "cleaned" (retention over), or None. The one place the rules
    are: the sweeps act on it, the preview counts it."""
    # a waiting task's window opens at its release: its dependencies' own timeouts bound it
    waiting = directory == "pending" and task.waiting
    if (
        directory != "done"
        and not waiting
        and now - task.window_start > settings.queue_seconds * 1000
    ):
        return "timeout"
    if directory == "processing" and task.status is State.PENDING:
        return "requeue"  # a claim that crashed between its rename and its rewrite
    # a leased record with no lease, or one a failed claim of an older version carried back
    # into pending/ (where no claim takes it): as good as lapsed, its worker never got it
    stranded = task.status is State.PROCESSING and (
        directory == "pending" or (directory == "processing" and task.lease is None)
    )
    if stranded or (
        directory == "processing" and task.lease is not None and task.lease.until <= now
    ):
        if task.cancel_requested:
            return "cancelled"  # its worker is gone: no one else may run what was stopped
        if task.max_attempts and task.attempts >= task.max_attempts:
            return "failed"
        return "requeue"
    if directory == "done" and retention_over(task, settings, now):
        return "cleaned"
    return None


def retention_over(task: Task, settings: QueueSettings, now: int) -> bool:
    finished = task.finished_at if task.finished_at is not None else task.updated_at
    return retention_due(finished, task.fetched_at, settings, now)


def retention_due(finished: int, fetched: int | None, settings: QueueSettings, now: int) -> bool:
    """retention_over from the two times it counts from (what the sweep keeps of a record)."""
    return now >= retention_ends(finished, fetched, settings)


def retention_ends(finished: int, fetched: int | None, settings: QueueSettings) -> int:
    """When the retention of a done record with these two times is over (ms)."""
    if settings.retain_from == "fetched":
        if fetched is None:
            return finished + settings.max_retain_seconds * 1000
        return fetched + settings.retain_seconds * 1000
    return finished + settings.retain_seconds * 1000


def next_due(directory: str, task: Task, settings: QueueSettings) -> int | None:
    """The first time (ms) at which verdict() says anything of this copy unchanged, or None if
    it never will (a waiting task: its release rewrites it). A sweep that keeps this need not
    read the copy again before then, unless the copy changes. Held to verdict() by a test."""
    if directory == "done":
        finished = task.finished_at if task.finished_at is not None else task.updated_at
        return retention_ends(finished, task.fetched_at, settings)
    if directory == "pending" and task.waiting:
        return None
    due = task.window_start + settings.queue_seconds * 1000 + 1
    if directory == "processing" and task.status is State.PENDING:
        return -1
    if task.status is State.PROCESSING and (
        directory == "pending" or (directory == "processing" and task.lease is None)
    ):
        return -1
    if directory == "processing" and task.lease is not None:
        due = min(due, task.lease.until)
    return due


def plan_sweep(found: str, task: Task, source: str, *, now: int) -> Change | None:
    """The change a verdict (other than "cleaned") makes of the task; None for no change."""
    lapsed = Because(lapsed=True)
    if found == "timeout":
        new = task.replace(
            status=State.FAILED,
            error="timeout",
            lease=None,
            updated_at=now,
            finished_at=now,
            ended_by=None,
        )
        return Change(source, task, new, "timeout", {"error": "timeout"})
    if found == "requeue" and task.status is State.PENDING:
        # the interrupted claim: the attempt never began
        return Change(source, task, task.replace(updated_at=now), "requeue")
    if found == "cancelled":
        new = task.replace(status=State.CANCELLED, lease=None, updated_at=now, finished_at=now)
        return Change(source, task, new, "cancelled", because=lapsed)
    if found == "failed":
        new = task.replace(
            status=State.FAILED, error="attempts", lease=None, updated_at=now, finished_at=now
        )
        return Change(source, task, new, "failed", {"error": "attempts"}, lapsed)
    if found == "requeue":
        new = task.replace(status=State.PENDING, lease=None, updated_at=now)
        return Change(source, task, new, "requeue", because=lapsed)
    return None
