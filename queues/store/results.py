"""What the store's verbs answer, besides a Task."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


# How a member counts in its group's outcome: the status it first ended with, or "gone" for a
# member registered by a post that never wrote it (rules.GROUP_GONE_MS)
GROUP_OUTCOMES = ("finished", "failed", "cancelled", "gone")


@dataclass(frozen=True)
class GroupCounts:
    """A group's bookkeeping: members posted (registered), members ended, and the ended ones
    by outcome (GROUP_OUTCOMES, in that order)."""

    posted: int = 0
    ended: int = 0
    by_outcome: tuple[int, ...] = (0, 0, 0, 0)

    def counted(self, outcome: str, n: int = 1) -> GroupCounts:
        """One more ended member (or n) with this outcome."""
        by = list(self.by_outcome)
        by[GROUP_OUTCOMES.index(outcome)] += n
        return GroupCounts(self.posted, self.ended + n, tuple(by))

    def outcomes(self) -> dict[str, int]:
        return dict(zip(GROUP_OUTCOMES, self.by_outcome, strict=True))


@dataclass(frozen=True, kw_only=True)
class GroupView:
    """A group's progress (`GET .../groups/{id}`): its state (rules.group_state), its counts,
    the queue its callback goes to once a post closed it, and the callback posted."""

    host: str
    queue: str
    group: str
    state: str
    counts: GroupCounts
    posted_by: str | None  # the group's producer (its first post's); None: public
    on_complete_queue: str | None
    callback: tuple[str, str] | None  # (queue, id)

    def view(self) -> dict[str, Any]:
        return {
            "id": self.group,
            "host": self.host,
            "queue": self.queue,
            "state": self.state,
            "postedBy": self.posted_by,
            "posted": self.counts.posted,
            "ended": self.counts.ended,
            "running": self.counts.posted - self.counts.ended,
            "counts": self.counts.outcomes(),
            "onCompleteQueue": self.on_complete_queue,
            "callback": None
            if self.callback is None
            else {"queue": self.callback[0], "id": self.callback[1]},
        }
