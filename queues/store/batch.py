"""What a batch call takes: the entries of a batch post and of a batch finish, and its bounds.

A batch amortises the flushes (one fsync per directory touched and one of the event log for the
whole call) that one-at-a-time calls each pay; entries are checked here before anything is
written, and a refusal names the entry's index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .errors import InvalidRequest
from .settings import QueueSettings

MAX_BATCH = 100
OUTCOMES = ("result", "fail", "retry")


@dataclass(frozen=True, kw_only=True)
class PostEntry:
    """One task of a batch post: what a single post takes, entry by entry."""

    item: Any
    priority: int = 0
    delay_seconds: int = 0
    idempotency_key: str | None = None
    # the tasks it runs after, as posted ("id" of the same queue, or "queue/id" of its host),
    # and what a failed one does to it ("fail", the default, or "cancel"): rules.check_after
    after: tuple[str, ...] = ()
    on_dependency_failure: str | None = None
    concurrency_key: str | None = None


@dataclass(frozen=True, kw_only=True)
class OnComplete:
    """A group's callback, as the post that closes the group gives it: the task to post into
    `queue` (of the group's host and store) once every member has ended, its item `item` with
    the group's outcome added under "group". `settings` are that queue's, as the caller read
    them when it closed the group: the ending that posts the callback has no console to ask."""

    queue: str
    item: Any
    settings: QueueSettings


@dataclass(frozen=True, kw_only=True)
class Report:
    """One outcome of a batch finish: `result` finishes the task, `fail` fails it, `retry`
    fails it with retry (back to pending after the backoff while its budget lasts)."""

    task_id: str
    attempt: int
    outcome: Literal["result", "fail", "retry"]
    result: Any = None


def check_size(entries: Sequence[object], what: str) -> None:
    """1..MAX_BATCH entries: an empty batch is a client bug, a larger one is split by it."""
    if not 1 <= len(entries) <= MAX_BATCH:
        raise InvalidRequest(f"A batch holds 1 to {MAX_BATCH} {what} (got {len(entries)}).")


def first_repeat(keys: Sequence[object]) -> int | None:
    """The index of the first entry whose key (not None) an earlier entry already has."""
    seen: set[object] = set()
    for index, key in enumerate(keys):
        if key is None:
            continue
        if key in seen:
            return index
        seen.add(key)
    return None
