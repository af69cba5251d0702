"""The operators' view of one queue: tasks chosen by status, id prefix and a test on the record,
newest or oldest first, by offset or from a cursor; how many tasks each status holds; and how
many claimable tasks a pending one has ahead of it.

Everything but the test is answered from the listing index (listing_index.py), so a page reads
only the records it shows and a count reads none. A test (the console's `item.url contains x`)
needs each candidate's record: such a selection reads at most `budget` records per call and
says where to go on, so a deep queue never holds one request for long.

A task that moved between the index's look and the read of its record (claimed, cancelled,
cleaned) no longer matches its status and is left out of that one answer.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from . import copies
from .clock import now_ms
from .core import QueueCore
from .errors import CorruptRecord
from .listing_index import ListingIndex
from .paths import QueueDirs
from .records import State, Task

OrderKey = tuple[int, int, str]  # (postedAt, seq, id): the listing order, and a cursor into it


def key_of(task: Task) -> OrderKey:
    return (task.posted_at, task.seq, task.id)


@dataclass(frozen=True, kw_only=True)
class Selection:
    """Which tasks: all of them by default."""

    status: State | None = None
    id_prefix: str = ""  # lower-case hex; 16 characters is one id
    test: Callable[[Task], bool] | None = None  # a test on the record: each candidate is read


@dataclass(frozen=True, kw_only=True)
class Found:
    tasks: list[Task]  # in the order asked for
    # Every match, when the index alone answers (no test); None with a test, where only
    # reading every candidate would tell.
    count: int | None
    # Where the next call goes on from (pass it as `after`), or None: nothing further.
    next_after: OrderKey | None
    read: int  # records read


@dataclass(frozen=True, kw_only=True)
class StateCounts:
    pending: int
    delayed: int  # pending, not claimable before availableAt
    retrying: int  # pending after a failure, waiting out the backoff
    processing: int
    finished: int
    failed: int
    cancelled: int

    def of(self, state: State) -> int:
        return int(getattr(self, state.value))


def find(
    core: QueueCore,
    host: str,
    queue: str,
    selection: Selection,
    *,
    newest_first: bool = True,
    limit: int = 50,
    offset: int = 0,
    after: OrderKey | None = None,
    until: OrderKey | None = None,
    budget: int = 2_000,
) -> Found:
    """Up to `limit` matching tasks. `after`: start past this key (a cursor); `until`: stop
    at this key, inclusive (in the order asked for: the bulk actions' bound, the newest task
    counted before the operator confirmed). `offset` skips matches (index-only selections)."""
    limit, offset, budget = max(limit, 0), max(offset, 0), max(budget, 1)
    with core.queue_dirs(host, queue) as qd:
        index = core.listings.of(qd)
        with index.lock:
            index.refresh(qd)
            keys = _candidates(index, selection, newest_first, after, until)
            if selection.test is None:
                chosen = [(k, index.tasks[k[2]].directory) for k in keys[offset : offset + limit]]
        if selection.test is not None:
            return _scan(qd, index, keys, selection, max(limit, 1), budget)
        tasks = [t for (*_, i), d in chosen if (t := _read(qd, d, i, selection)) is not None]
        more = offset + limit < len(keys)
        return Found(tasks=tasks, count=len(keys), read=len(chosen),
                     next_after=chosen[-1][0] if more and chosen else None)  # fmt: skip


def _candidates(
    index: ListingIndex,
    selection: Selection,
    newest_first: bool,
    after: OrderKey | None,
    until: OrderKey | None,
) -> list[OrderKey]:
    """The keys that pass the index's filters, in the order asked for (index lock held)."""
    prefix = selection.id_prefix
    if len(prefix) == 16:  # one id: looked up, not looked for
        entry = index.tasks.get(prefix)
        if entry is None or selection.status not in (None, entry.status):
            return []
        key = (entry.posted_at, entry.seq, prefix)
        return [key] if _within(key, newest_first, after, until) else []
    order = index.order(selection.status)  # ascending
    if newest_first:  # descending: keys before `after`, down to `until`
        low = bisect_left(order, until) if until is not None else 0
        high = bisect_left(order, after) if after is not None else len(order)
    else:  # ascending: keys past `after`, up to `until`
        low = bisect_right(order, after) if after is not None else 0
        high = bisect_right(order, until) if until is not None else len(order)
    keys = order[low:high]
    if prefix:
        keys = [k for k in keys if k[2].startswith(prefix)]
    if newest_first:
        keys.reverse()
    return keys


def _within(
    key: OrderKey, newest_first: bool, after: OrderKey | None, until: OrderKey | None
) -> bool:
    if newest_first:
        return (after is None or key < after) and (until is None or key >= until)
    return (after is None or key > after) and (until is None or key <= until)


def _scan(
    qd: QueueDirs,
    index: ListingIndex,
    keys: list[OrderKey],
    selection: Selection,
    limit: int,
    budget: int,
) -> Found:
    """Read candidates in order until `limit` pass the test or `budget` records were read."""
    assert selection.test is not None
    tasks: list[Task] = []
    read = 0
    last: OrderKey | None = None
    for key in keys:
        if len(tasks) >= limit or read >= budget:
            return Found(tasks=tasks, count=None, next_after=last, read=read)
        with index.lock:
            entry = index.tasks.get(key[2])
        last = key
        if entry is None:
            continue
        read += 1
        task = _read(qd, entry.directory, key[2], selection)
        if task is not None and selection.test(task):
            tasks.append(task)
    return Found(tasks=tasks, count=None, next_after=None, read=read)


def _read(qd: QueueDirs, directory: str, task_id: str, selection: Selection) -> Task | None:
    """The record, if it still is what the index said: there, and of the status asked for."""
    try:
        task = copies.read_copy(qd, directory, task_id)
    except CorruptRecord:
        return None
    if task is None or not copies.belongs(qd, task_id, task):
        return None
    if selection.status is not None and task.status is not selection.status:
        return None
    return task


def state_counts(core: QueueCore, host: str, queue: str, *, now: int | None = None) -> StateCounts:
    """Per status from the listing index, and of the pending ones how many wait for their
    time or for a retry's backoff from the claim index: no record is read (once both are warm)."""
    now = now_ms(now)
    with core.queue_dirs(host, queue) as qd:
        index = core.listings.of(qd)
        with index.lock:
            index.refresh(qd)
            counts = index.counts()
        with core.lock:
            waiting = core.index(qd).entries.waiting(now)
    return StateCounts(
        pending=counts[State.PENDING],
        delayed=waiting.delayed,
        retrying=waiting.retrying,
        processing=counts[State.PROCESSING],
        finished=counts[State.FINISHED],
        failed=counts[State.FAILED],
        cancelled=counts[State.CANCELLED],
    )


AHEAD_COUNTED = 1_000  # "this many or more": past it, the exact figure changes no one's answer


def claimable_ahead(core: QueueCore, host: str, queue: str, task: Task, *, now: int) -> int:
    """How many claimable tasks the next claims take before `task` (its priority first, then
    post order), at most AHEAD_COUNTED; from the claim index, no record read, at a cost of
    about the count (index.count_before), not of the queue's depth."""
    mine = (-task.priority, task.posted_at, task.seq, task.id)
    with core.queue_dirs(host, queue) as qd, core.lock:
        return core.index(qd).count_before(mine, now, AHEAD_COUNTED)
