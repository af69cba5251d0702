"""Operator verbs on many tasks: the ones ticked on a page, or every task a filter matches.

A filter's tasks are counted first (the operator confirms that number), bounded by the newest
task counted and by the moment of the count, then walked oldest first in chunks of CHUNK: each
request does one chunk and hands back a cursor, so a 100,000-task filter never holds one request
for minutes. The walk acts on the counted set only: a task posted after the count is past the
bound, and one that entered the filter's status after it (failed since, say) is past the moment
(Task.entered_at). Each task goes through operations.act_on_task, the same per-task service as the
task page, with the operator's name; a refusal is counted by its code, a cancel that could only
be asked of a running task as requested, and the counted tasks the walk no longer met (they
left the status, or left and came back) as no longer matching, so the report adds up to the
count.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from queues import stores
from queues.console import operations
from queues.console.queue_page import Filter
from queues.models import Queue
from queues.store import DependencyFailed, NotFound, OrderKey, State, StoreError
from queues.store.clock import now_ms
from queues.store.selecting import key_of

CHUNK = 500
# A field search's count reads every candidate record: the newest match is found within
# COUNT_BUDGET reads, then all are counted a block at a time (not held in memory at once).
COUNT_BUDGET = 1_000_000
COUNT_BLOCK = 5_000


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What the confirmation step shows: how many tasks the action would touch."""

    count: int
    until: OrderKey | None  # the newest task counted: the walk stops there
    cutoff: int  # the moment of the count (ms): a task that entered the status since is left


@dataclass(kw_only=True)
class Tally:
    """Done and refused so far, carried from chunk to chunk by the confirmation form."""

    done: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # the store's error code -> tasks
    requested: int = 0  # cancels of running tasks: asked, not done (the worker may finish)
    counted: int | None = None  # what the operator confirmed (None: not carried, old forms)

    @property
    def refused_total(self) -> int:
        return sum(self.refused.values())

    @property
    def no_longer_matching(self) -> int:
        """The counted tasks the walk did not act on: they had left the filter by then."""
        if self.counted is None:
            return 0
        return max(self.counted - self.done - self.requested - self.refused_total, 0)

    def summary(self) -> str:
        refused = ", ".join(f"{n} {code}" for code, n in sorted(self.refused.items()))
        parts = [f"{self.done} done"]
        if self.requested:
            parts.append(f"{self.requested} cancel requested (still running)")
        parts.append(f"{self.refused_total} refused" + (f" ({refused})" if refused else ""))
        if self.no_longer_matching:
            parts.append(f"{self.no_longer_matching} no longer matching")
        text = ", ".join(parts)
        if self.counted is not None and (self.requested or self.no_longer_matching):
            text += f", of {self.counted} counted"
        return text


def plan(queue: Queue, found: Filter) -> Plan:
    """Count the filter's tasks now (the index alone, unless there is a field search)."""
    host, name, selection = queue.host.name, queue.name, found.selection()
    cutoff = now_ms(None)  # before the count: whatever enters the status later is past it
    try:
        store = stores.of(host, name)
        first = store.find(host, name, selection, limit=1, budget=COUNT_BUDGET)
        if first.count is not None:
            until = key_of(first.tasks[0]) if first.tasks else None
            return Plan(count=first.count, until=until, cutoff=cutoff)
        if not first.tasks:
            return Plan(count=0, until=None, cutoff=cutoff)
        until, count, after = key_of(first.tasks[0]), 0, None
        while True:  # oldest first up to the newest match, a block of records at a time
            block = store.find(host, name, selection, newest_first=False, limit=COUNT_BLOCK,
                               budget=COUNT_BLOCK, after=after, until=until)  # fmt: skip
            count += len(block.tasks)
            if block.next_after is None:
                return Plan(count=count, until=until, cutoff=cutoff)
            after = block.next_after
    except NotFound:
        return Plan(count=0, until=None, cutoff=cutoff)


def apply_chunk(
    queue: Queue,
    found: Filter,
    action: str,
    *,
    by: str,
    after: OrderKey | None,
    until: OrderKey,
    cutoff: int,
    tally: Tally,
    chunk: int | None = None,
) -> OrderKey | None:
    """Act on the next `chunk` tasks of the filter past `after`, up to `until`, leaving alone
    those that entered the filter's status at or after `cutoff`; add to `tally`. Returns where
    the next chunk starts, or None when the walk is over."""
    chunk = chunk or CHUNK
    try:
        page = stores.of(queue.host.name, queue.name).find(
            queue.host.name, queue.name, found.selection(), newest_first=False,
            limit=chunk, after=after, until=until, budget=chunk * 4,
        )  # fmt: skip
    except NotFound:
        return None
    counted = [t.id for t in page.tasks if found.status is None or t.entered_at < cutoff]
    apply_to_ids(queue, counted, action, by=by, tally=tally)
    return page.next_after


def apply_to_ids(queue: Queue, ids: list[str], action: str, *, by: str, tally: Tally) -> None:
    """Act on each task of `ids`. A retry refused because the task runs after one that failed
    (dependency_failed) is held back when that one is among `ids` and still to come, and done
    again right after it: a ticked chain, in whatever order it is shown, is retried from its
    first task on, each one then waiting for the one before (store: rules.retry_waits_for)."""
    asked = {f"{queue.name}/{task_id}" for task_id in ids}
    held: dict[str, list[str]] = {}  # a dependency among `ids` -> the retries held for it
    work = deque(ids)
    while work:
        task_id = work.popleft()
        asked.discard(f"{queue.name}/{task_id}")
        try:
            task = operations.act_on_task(queue, task_id, action, by=by)
        except DependencyFailed as exc:
            if exc.dependency in asked:
                held.setdefault(exc.dependency, []).append(task_id)
            else:
                tally.refused[exc.code] += 1
            continue
        except StoreError as exc:
            tally.refused[exc.code] += 1
            continue
        work.extendleft(reversed(held.pop(f"{queue.name}/{task_id}", [])))
        if action == "cancel" and task.status is not State.CANCELLED:
            tally.requested += 1  # a running task: asked to stop, which it may not do
        else:
            tally.done += 1
    left = sum(len(waiting) for waiting in held.values())  # what they ran after was refused
    if left:
        tally.refused[DependencyFailed.code] += left
