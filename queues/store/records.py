"""The task record: a frozen value, its on-disk JSON shape, and the table of transitions."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .errors import CorruptRecord, InvalidTransition


class State(StrEnum):
    PENDING = "pending"
    PROCESSING = "processing"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def directory(self) -> str:
        """The state directory the record lives in: the directory is the status."""
        return self.value if self in (State.PENDING, State.PROCESSING) else "done"

    @property
    def terminal(self) -> bool:
        return self.directory == "done"


# Every change the store may make, as (source, target, event) (store.md, "Transitions"). A source
# of None is a new task, a target of None a deleted one; an event of None a recorded change that
# writes no event line. QueueCore checks every record written and every event line against it: a
# triple not here is a bug in the store, refused with InvalidTransition before anything changes.
TRANSITIONS: frozenset[tuple[State | None, State | None, str | None]] = frozenset(
    {
        (None, State.PENDING, "posted"),
        (State.PENDING, State.PROCESSING, "claimed"),
        (State.PROCESSING, State.PROCESSING, "progress"),
        (State.PROCESSING, State.FINISHED, "result"),
        (State.PROCESSING, State.FAILED, "failed"),
        (State.PENDING, State.FAILED, "timeout"),
        # dependencies (dependencies.py): the last one finished; one finished of several (no
        # line: the task still waits); one failed, which fails or cancels the waiting task
        (State.PENDING, State.PENDING, "released"),
        (State.PENDING, State.PENDING, None),
        (State.PENDING, State.FAILED, "failed"),
        (State.PROCESSING, State.FAILED, "timeout"),
        (State.PROCESSING, State.PENDING, "requeue"),
        # the sweep's requeue of an interrupted claim: a pending record found in processing/
        (State.PENDING, State.PENDING, "requeue"),
        (State.PENDING, State.CANCELLED, "cancelled"),
        (State.PROCESSING, State.PROCESSING, None),  # a cancel requested of a running task
        (State.PROCESSING, State.CANCELLED, "cancelled"),
        # an operator ends a stuck task's lease now (its worker may be gone)
        (State.PROCESSING, State.PENDING, "requeued"),
        # a claim given back before its caller heard of it: the attempt never began
        (State.PROCESSING, State.PENDING, "unclaimed"),
        # an operator ends a waiting task's backoff or delay now
        (State.PENDING, State.PENDING, "hastened"),
        (State.FAILED, State.PENDING, "retried"),
        (State.CANCELLED, State.PENDING, "retried"),
        *((state, state, "fetched") for state in State if state.terminal),
        *((state, None, "cleaned") for state in State if state.terminal),
        # an operator deletes an ended task before its retention is over
        *((state, None, "deleted") for state in State if state.terminal),
    }
)

# Every status a task can have, in the order of its life; the API, the console and tasklogs
# take their lists from here.
STATUSES: tuple[str, ...] = tuple(state.value for state in State)


def check_transition(
    task_id: str, source: State | None, target: State | None, event: str | None
) -> None:
    if (source, target, event) not in TRANSITIONS:
        raise InvalidTransition(task_id, _name(source), _name(target), event)


def _name(state: State | None) -> str:
    return state.value if state is not None else "nothing"


@dataclass(frozen=True, kw_only=True)
class Lease:
    worker: str
    until: int


# snake_case attribute -> the specification's camelCase name
_SPEC = {
    "id": "id",
    "host": "host",
    "queue": "queue",
    "status": "status",
    "item": "item",
    "posted_by": "postedBy",
    "posted_at": "postedAt",
    "updated_at": "updatedAt",
    "attempts": "attempts",
    "lease": "lease",
    "progress": "progress",
    "result": "result",
    "error": "error",
    "finished_at": "finishedAt",
    "fetched_at": "fetchedAt",
}
# taskhoster's extensions: written only when set (differs from the default)
_EXT = {
    "rev": "rev",
    "priority": "priority",
    "available_at": "availableAt",
    "max_attempts": "maxAttempts",
    "idempotency_key": "idempotencyKey",
    "cancel_requested": "cancelRequested",
    "last_error": "lastError",
    # The claim's own lease length: progress extends the lease by it (api.md), and the
    # specification's lease {worker, until} does not say how long the claim asked for.
    "lease_seconds": "leaseSeconds",
    # When a retry (an operator's, or the attempt budget's backoff) put the task back: its queue
    # timeout counts from here, not from postedAt (a lapsed lease's requeue leaves it alone).
    "requeued_at": "requeuedAt",
    # How many attempts had run when an operator last retried the task: a failure's backoff
    # counts the attempts since, so a retried task waits the first delay again, not the cap.
    "retried_after": "retriedAfter",
    # The worker whose own report (result or fail) ended the latest attempt, so that the same
    # report sent again is known for a replay once the lease is gone; cleared when anything
    # else changes the task's course (a claim, a retry, a cancel, a timeout).
    "ended_by": "endedBy",
    # A task an operator re-posted from another task's archived item: that task's id. Every
    # event line of this task names it (`from`), so Task Logs links the two.
    "reposted_from": "repostedFrom",
    # The operator who asked a running task to stop: the request writes no line (the table's
    # (processing, processing, none)), so the `cancelled` line that ends it names them.
    "cancel_requested_by": "cancelRequestedBy",
    # The queue's post sequence at the post (sequence.py): the tie-breaker of tasks posted in
    # one millisecond, so they are claimed and listed in the order they were posted. A record
    # without it (posted before it was kept) sorts first among its millisecond's, by id.
    "seq": "seq",
    # When the latest claim took the task: when a processing task entered its state (its
    # updatedAt moves with every heartbeat), so the console's bulk actions can leave alone a
    # task that was claimed after they counted.
    "claimed_at": "claimedAt",
    # Dependencies (dependencies.py): the tasks this one was posted to run after, as
    # "queue/id" of its host; those of them that have not finished yet (the task is kept out
    # of claims while any is left); "cancel" when a failed one is to cancel this task rather
    # than fail it; when the last one finished (its queue timeout counts from here); and the
    # one whose failure ended this task.
    "after": "after",
    "waiting_for": "waitingFor",
    "on_dependency_failure": "onDependencyFailure",
    "released_at": "releasedAt",
    "failed_dependency": "failedDependency",
    # The W3C trace context of the post that made the task (trace_context.py): the worker's
    # span for running it links to the producer's.
    "traceparent": "traceparent",
    # The post's concurrency key: at most the queue's maxPerKey tasks with one key are in
    # processing at once (limits.py); other tasks are claimed past the held ones.
    "concurrency_key": "concurrencyKey",
    # The group the task was posted in (groups.py): when every member of a closed group has
    # ended, the group's callback task is posted once.
    "group": "group",
}
# ext fields kept out of the producer's status view: which worker ran a task, and which
# operator asked it to stop, are the workers' and operators' business, as the lease is
_NOT_IN_STATUS_VIEW = frozenset(
    {"endedBy", "cancelRequestedBy", "seq", "claimedAt", "retriedAfter"}
)
_STATUS_VIEW = (
    "id",
    "host",
    "queue",
    "status",
    "attempts",
    "progress",
    "result",
    "error",
    "postedAt",
    "updatedAt",
    "finishedAt",
)


@dataclass(frozen=True, kw_only=True)
class Task:
    id: str
    host: str
    queue: str
    status: State
    item: dict[str, Any]
    posted_by: str | None
    posted_at: int
    updated_at: int
    attempts: int = 0
    lease: Lease | None = None
    progress: Any = None
    result: Any = None
    error: str | None = None
    finished_at: int | None = None
    fetched_at: int | None = None
    rev: int = 0
    priority: int = 0
    available_at: int = 0
    max_attempts: int = 0
    idempotency_key: str | None = None
    cancel_requested: bool = False
    last_error: Any = None
    lease_seconds: int = 0
    requeued_at: int | None = None
    retried_after: int = 0
    ended_by: str | None = None
    reposted_from: str | None = None
    cancel_requested_by: str | None = None
    seq: int = 0
    claimed_at: int | None = None
    after: list[str] | None = None
    waiting_for: list[str] | None = None
    on_dependency_failure: str | None = None
    released_at: int | None = None
    failed_dependency: str | None = None
    traceparent: str | None = None
    concurrency_key: str | None = None
    group: str | None = None

    def replace(self, **changes: Any) -> Task:
        """A copy with `changes` and the next revision (every write raises rev by one).

        Built on the instance's own attributes rather than through dataclasses.replace and
        the frozen __init__ (one object.__setattr__ per field): every change of a task makes
        one, and that was a tenth of a drained task's CPU."""
        if not _FIELDS.issuperset(changes):
            raise TypeError(f"Task has no fields {sorted(set(changes) - _FIELDS)}")
        return _made({**self.__dict__, **changes, "rev": self.rev + 1})

    @classmethod
    def of(cls, **values: Any) -> Task:
        """Task(**values) without the frozen __init__'s object.__setattr__ per field (every
        post makes one); the fields left out take their defaults."""
        if not _FIELDS.issuperset(values) or not _REQUIRED_FIELDS.issubset(values):
            return cls(**values)  # the constructor's own TypeError names the field
        return _made({**_DEFAULTS, **values})

    def numbered(self, seq: int) -> Task:
        """A copy with its post sequence number (sequence.py): still the same revision, since
        a new task is numbered before its first write."""
        return _made({**self.__dict__, "seq": seq})

    def to_record(self) -> dict[str, Any]:
        values = self.__dict__
        out = {name: values[attr] for attr, name in _SPEC_PAIRS}
        out["status"] = self.status.value
        lease = self.lease
        if lease is not None:
            out["lease"] = {"worker": lease.worker, "until": lease.until}
        for attr, name in _EXT_PAIRS:
            value = values[attr]
            if value is not None and value is not False and value != 0:
                out[name] = value
        return out

    def full_view(self) -> dict[str, Any]:
        """The record as a claim answers it: without the post sequence, the store's own order
        (a PostgreSQL queue keeps it in a column, not in the record), and without claimedAt,
        the console's own (a worker has the lease), nor retriedAfter, the backoff's."""
        record = self.to_record()
        record.pop("seq", None)
        record.pop("claimedAt", None)
        record.pop("retriedAfter", None)
        return record

    @property
    def entered_at(self) -> int:
        """When the task entered its status, as far as its record tells: an ended task when it
        ended, a processing one when it was claimed, a pending one at its latest change (a
        pending record changes only by coming back to pending)."""
        if self.status.terminal and self.finished_at is not None:
            return self.finished_at
        if self.status is State.PROCESSING and self.claimed_at is not None:
            return self.claimed_at
        return self.updated_at

    def status_view(self) -> dict[str, Any]:
        record = self.to_record()
        view = {name: record[name] for name in _STATUS_VIEW}
        view.update(
            {
                name: record[name]
                for name in _EXT.values()
                if name in record and name not in _NOT_IN_STATUS_VIEW
            }
        )
        return view

    @property
    def window_start(self) -> int:
        """Where the queue timeout counts from: the post, the latest retry, or the release of a
        task that waited for others."""
        return max(self.posted_at, self.requeued_at or 0, self.released_at or 0)

    @property
    def waiting(self) -> bool:
        """A pending task some of whose dependencies have not finished: no claim takes it."""
        return self.status is State.PENDING and bool(self.waiting_for)

    @classmethod
    def from_record(cls, data: Any) -> Task:
        return _made({**_DEFAULTS, **parse_record(data)})


_FIELDS = frozenset(field.name for field in dataclasses.fields(Task))
_REQUIRED_FIELDS = frozenset(
    field.name for field in dataclasses.fields(Task) if field.default is dataclasses.MISSING
)
# the value of every field that has one, for a record that leaves the field out
_DEFAULTS = {
    field.name: field.default
    for field in dataclasses.fields(Task)
    if field.default is not dataclasses.MISSING
}


def _made(values: dict[str, Any]) -> Task:
    """A Task from every one of its fields' values, already checked (parse_record) or taken
    from a Task: the frozen __init__ would set each field through object.__setattr__ again."""
    task = object.__new__(Task)
    task.__dict__.update(values)
    return task


def parse_record(data: Any) -> dict[str, Any]:
    """The checked fields of a record (Task's arguments); CorruptRecord if it is not one.

    The claim index needs only a few of them from every pending file, so it stops here and
    skips building the Task, with exactly the same checks."""
    try:
        return _parse(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptRecord(f"Not a task record: {exc}") from exc


_NAMES = frozenset(_SPEC.values()) | frozenset(_EXT.values())
_SPEC_PAIRS, _EXT_PAIRS = tuple(_SPEC.items()), tuple(_EXT.items())
_STATES = {state.value: state for state in State}
# attr -> the exact types its value may have (orjson makes no subclasses; bool is not an int)
_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "host": (str,),
    "queue": (str,),
    "item": (dict,),
    "posted_at": (int,),
    "updated_at": (int,),
    "attempts": (int,),
    "finished_at": (int, type(None)),
    "fetched_at": (int, type(None)),
    "posted_by": (str, type(None)),
    "error": (str, type(None)),
    "rev": (int,),
    "priority": (int,),
    "available_at": (int,),
    "max_attempts": (int,),
    "idempotency_key": (str, type(None)),
    "cancel_requested": (bool,),
    "lease_seconds": (int,),
    "requeued_at": (int, type(None)),
    "retried_after": (int,),
    "ended_by": (str, type(None)),
    "reposted_from": (str, type(None)),
    "cancel_requested_by": (str, type(None)),
    "seq": (int,),
    "claimed_at": (int, type(None)),
    "after": (list, type(None)),
    "waiting_for": (list, type(None)),
    "on_dependency_failure": (str, type(None)),
    "released_at": (int, type(None)),
    "failed_dependency": (str, type(None)),
    "traceparent": (str, type(None)),
    "concurrency_key": (str, type(None)),
    "group": (str, type(None)),
}


# the specification's name -> (attribute, the exact types its value may have, or None: any)
_BY_NAME = {name: (attr, _TYPES.get(attr)) for attr, name in (*_SPEC_PAIRS, *_EXT_PAIRS)}
_REQUIRED = frozenset(_SPEC.values())


def _parse(data: Any) -> dict[str, Any]:
    """The constructor's arguments, every field's type checked; it runs once per record read
    (a claim index load reads every pending file), so it walks the record's own fields once
    and makes no call per field."""
    if not isinstance(data, dict):
        raise TypeError("record is not an object")
    if not _NAMES.issuperset(data):
        raise ValueError(f"unknown fields {sorted(set(data) - _NAMES)}")
    if not _REQUIRED.issubset(data):
        raise KeyError(", ".join(sorted(_REQUIRED - set(data))))
    values = {}
    for name, value in data.items():
        attr, allowed = _BY_NAME[name]
        if allowed is not None and type(value) not in allowed:
            raise TypeError(f"{attr} cannot be {value!r}")
        values[attr] = value
    values["status"] = _STATES[values["status"]]
    lease = values["lease"]
    if lease is not None:
        if not isinstance(lease, dict) or set(lease) != {"worker", "until"}:
            raise TypeError("lease must be {worker, until}")
        values["lease"] = Lease(worker=_str(lease["worker"]), until=_int(lease["until"]))
    return values


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value
