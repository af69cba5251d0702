"""What the store's verbs answer, besides a Task."""

from __future__ import annotations

from dataclasses import dataclass

from .records import Task


@dataclass(frozen=True, kw_only=True)
class PostResult:
    task: Task
    replayed: bool  # True: an Idempotency-Key matched, this is the first post's task


@dataclass(frozen=True, kw_only=True)
class Reported:
    """What a worker's result or fail answers."""

    task: Task
    # True: the worker that ended this attempt sent the same report again (a retry after a
    # lost answer, say); nothing changed and `task` is the record as it stands
    replayed: bool


@dataclass(frozen=True, kw_only=True)
class TaskPage:
    count: int  # all matching tasks, not just this page
    tasks: list[Task]  # newest first


@dataclass(frozen=True, kw_only=True)
class QueueStats:
    pending: int
    processing: int
    done: int
    delayed: int  # pending, not claimable before availableAt
    retrying: int  # pending after a failure, waiting out the backoff
    oldest_pending_ms: int  # age of the oldest pending task; 0 when none


class _Any:
    """The `posted_by` filter that matches every task (None means public posts only)."""

    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()
