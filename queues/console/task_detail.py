"""The console's task page apart from HTTP: the record, its attempts as Task Logs saw them,
and the operator's actions its state allows."""

from __future__ import annotations

from dataclasses import dataclass, replace

from queues import stores
from queues.auth.access import User
from queues.models import Queue
from queues.store import State, Task
from queues.stores.why import why_pending
from queues.text.failure_words import end_in_words
from tasklogs.failure_lines import failure_key, failure_lines
from tasklogs.models import TaskEvent
from tasklogs.queries import task_payloads

HISTORY = 1000  # the newest events read for the attempt history: far above any attempt budget
# The events that end an attempt: a worker's report, the sweep, or an operator.
ENDINGS = frozenset({"result", "failed", "requeue", "requeued", "timeout", "cancelled"})
# The events after which the task waits to be claimed: a post, an operator's retry, an end.
READY = ENDINGS | {"posted", "retried"}
# A claim the server gave back as its client left: no attempt, and the wait goes on.
UNCLAIMED = "unclaimed"


@dataclass(frozen=True, kw_only=True)
class Attempt:
    number: int
    worker: str
    claimed: TaskEvent
    ended: TaskEvent | None  # None: still running, or its end is not ingested yet
    ready: TaskEvent | None = None  # the event after which it waited to be claimed
    error_line: str = ""  # why it failed, in one line (tasklogs.failure_lines)

    @property
    def waited_ms(self) -> int | None:
        """From the post, retry or earlier end (a backoff included) to this claim."""
        return None if self.ready is None else _ms_between(self.ready, self.claimed)

    @property
    def ran_ms(self) -> int | None:
        return None if self.ended is None else _ms_between(self.claimed, self.ended)

    @property
    def lapsed(self) -> bool:
        """Its lease ran out before the worker reported (the sweep ended it)."""
        return bool(self.ended and self.ended.lapsed)


@dataclass(frozen=True, kw_only=True)
class TaskDetail:
    task: Task
    now_ms: int
    attempts: list[Attempt]
    operator_events: list[TaskEvent]  # the events an operator's action wrote, oldest first
    actions: frozenset[str]
    payloads: list[tuple[str, str]]
    why: str | None = None  # a pending task: why it is not running, in one line

    @property
    def lease_left_ms(self) -> int | None:
        lease = self.task.lease
        return None if lease is None else lease.until - self.now_ms

    @property
    def lapsed_count(self) -> int:
        return sum(attempt.lapsed for attempt in self.attempts)

    @property
    def error_words(self) -> str:
        """The store's word for how the task ended, said for people ("attempts used up")."""
        task = self.task
        return end_in_words(task.error or "", attempts=task.attempts,
                            max_attempts=task.max_attempts)  # fmt: skip

    @property
    def failure_before(self) -> object:
        """The failure before the latest retry, while the task has not failed for good: a
        failed task's Failure box is its end (each attempt's own line is in its attempts),
        and its last two attempts, failing alike, showed the same box twice."""
        task = self.task
        return None if task.status is State.FAILED else task.last_error


def allowed_actions(task: Task, *, item_archived: bool, now_ms: int = 0) -> frozenset[str]:
    """What the store would accept for this state (operating.py's refusals, read the other
    way): cancel what has not ended, hasten ("retry now") what waits out its backoff or delay
    at `now_ms`, requeue what is running, retry (with or without an edit)
    what failed or was cancelled, delete what has ended, re-post what has ended and whose item
    the archive keeps."""
    actions: set[str] = set()
    if task.status is State.PENDING:
        actions.add("cancel")
        if task.available_at > now_ms:
            actions.add("hasten")
    elif task.status is State.PROCESSING:
        actions.add("requeue")
        if not task.cancel_requested:
            actions.add("cancel")
    else:
        actions.add("delete")
        if task.status in (State.FAILED, State.CANCELLED):
            actions |= {"retry", "edit"}
        if item_archived:
            actions.add("repost")
    return frozenset(actions)


def _ms_between(first: TaskEvent, then: TaskEvent) -> int:
    return round((then.at - first.at).total_seconds() * 1000)


def task_detail(queue: Queue, task: Task, *, now_ms: int, user: User | None = None) -> TaskDetail:
    host, name = queue.host.name, queue.name
    events = list(
        TaskEvent.objects.filter(host=host, queue=name, task_id=task.id).order_by("-at", "-id")[
            :HISTORY
        ]
    )[::-1]
    archived = stores.of(host, name).has_archived_item(host, name, task.id)
    attempts = attempts_of(events)
    if user is not None:  # each failed attempt's reason, read with the user's rights
        lines = failure_lines(user, [attempt.ended for attempt in attempts if attempt.ended])
        attempts = [
            replace(attempt, error_line=lines.get(failure_key(attempt.ended), ""))
            if attempt.ended
            else attempt
            for attempt in attempts
        ]
    return TaskDetail(
        task=task,
        now_ms=now_ms,
        attempts=attempts,
        operator_events=[event for event in events if event.by],
        actions=allowed_actions(task, item_archived=archived, now_ms=now_ms),
        payloads=task_payloads(host, name, task.id),
        why=why_pending(task, queue.to_settings(), now=now_ms),
    )


def attempts_of(events: list[TaskEvent]) -> list[Attempt]:
    """Each claim and the event that ended it, from the task's events oldest first."""
    attempts: list[Attempt] = []
    open_claim: TaskEvent | None = None
    ready: TaskEvent | None = None  # the latest event after which the task waited for a claim
    claimed_after: TaskEvent | None = None
    for event in events:
        if event.event == "claimed":
            if open_claim is not None:  # its end was never logged (or is not ingested)
                attempts.append(_attempt(open_claim, None, claimed_after))
            open_claim, claimed_after = event, ready
        elif event.event in ENDINGS and open_claim is not None:
            attempts.append(_attempt(open_claim, event, claimed_after))
            open_claim = None
        elif event.event == UNCLAIMED:  # given back unheard: that attempt never began
            open_claim = None
        if event.event in READY:
            ready = event
    if open_claim is not None:
        attempts.append(_attempt(open_claim, None, claimed_after))
    return attempts


def _attempt(claimed: TaskEvent, ended: TaskEvent | None, ready: TaskEvent | None) -> Attempt:
    return Attempt(number=claimed.attempts, worker=claimed.worker, claimed=claimed, ended=ended,
                   ready=ready)  # fmt: skip
