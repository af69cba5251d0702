"""The console's task page apart from HTTP: the record, its attempts as Task Logs saw them,
and the operator's actions its state allows."""

from __future__ import annotations

from dataclasses import dataclass

from queues.models import Queue
from queues.services import get_store
from queues.store import State, Task
from tasklogs.models import TaskEvent
from tasklogs.queries import task_payloads

HISTORY = 1000  # the newest events read for the attempt history: far above any attempt budget
# The events that end an attempt: a worker's report, the sweep, or an operator.
ENDINGS = frozenset({"result", "failed", "requeue", "requeued", "timeout", "cancelled"})


@dataclass(frozen=True, kw_only=True)
class Attempt:
    number: int
    worker: str
    claimed: TaskEvent
    ended: TaskEvent | None  # None: still running, or its end is not ingested yet

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

    @property
    def lease_left_ms(self) -> int | None:
        lease = self.task.lease
        return None if lease is None else lease.until - self.now_ms

    @property
    def lapsed_count(self) -> int:
        return sum(attempt.lapsed for attempt in self.attempts)


def allowed_actions(task: Task, *, item_archived: bool) -> frozenset[str]:
    """What the store would accept for this state (operating.py's refusals, read the other
    way): cancel what has not ended, requeue what is running, retry (with or without an edit)
    what failed or was cancelled, delete what has ended, re-post what has ended and whose item
    the archive keeps."""
    actions: set[str] = set()
    if task.status is State.PENDING:
        actions.add("cancel")
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


def task_detail(queue: Queue, task: Task, *, now_ms: int) -> TaskDetail:
    host, name = queue.host.name, queue.name
    events = list(
        TaskEvent.objects.filter(host=host, queue=name, task_id=task.id).order_by("-at", "-id")[
            :HISTORY
        ]
    )[::-1]
    archived = get_store().has_archived_item(host, name, task.id)
    return TaskDetail(
        task=task,
        now_ms=now_ms,
        attempts=attempts_of(events),
        operator_events=[event for event in events if event.by],
        actions=allowed_actions(task, item_archived=archived),
        payloads=task_payloads(host, name, task.id),
    )


def attempts_of(events: list[TaskEvent]) -> list[Attempt]:
    """Each claim and the event that ended it, from the task's events oldest first."""
    attempts: list[Attempt] = []
    open_claim: TaskEvent | None = None
    for event in events:
        if event.event == "claimed":
            if open_claim is not None:  # its end was never logged (or is not ingested)
                attempts.append(_attempt(open_claim, None))
            open_claim = event
        elif event.event in ENDINGS and open_claim is not None:
            attempts.append(_attempt(open_claim, event))
            open_claim = None
    if open_claim is not None:
        attempts.append(_attempt(open_claim, None))
    return attempts


def _attempt(claimed: TaskEvent, ended: TaskEvent | None) -> Attempt:
    return Attempt(number=claimed.attempts, worker=claimed.worker, claimed=claimed, ended=ended)
