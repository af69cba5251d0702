"""Operator verbs on many tasks: the ones ticked on a page, or every task a filter matches.

A filter's tasks are counted first (the operator confirms that number), bounded by the newest
task counted, then walked oldest first in chunks of CHUNK: each request does one chunk and
hands back a cursor, so a 100,000-task filter never holds one request for minutes, and a task
posted after the count is left alone. Each task goes through console.act_on_task, the same
per-task service as the task page, with the operator's name; a refusal is counted by its code.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from queues import console
from queues.models import Queue
from queues.queue_page import Filter
from queues.services import get_store
from queues.store import NotFound, OrderKey, StoreError
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


@dataclass(kw_only=True)
class Tally:
    """Done and refused so far, carried from chunk to chunk by the confirmation form."""

    done: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # the store's error code -> tasks

    @property
    def refused_total(self) -> int:
        return sum(self.refused.values())

    def summary(self) -> str:
        refused = ", ".join(f"{n} {code}" for code, n in sorted(self.refused.items()))
        return f"{self.done} done, {self.refused_total} refused" + (
            f" ({refused})" if refused else "")  # fmt: skip


def plan(queue: Queue, found: Filter) -> Plan:
    """Count the filter's tasks now (the index alone, unless there is a field search)."""
    store, selection = get_store(), found.selection()
    try:
        first = store.find(queue.host.name, queue.name, selection, limit=1,
                           budget=COUNT_BUDGET)  # fmt: skip
        if first.count is not None:
            return Plan(count=first.count, until=key_of(first.tasks[0]) if first.tasks else None)
        if not first.tasks:
            return Plan(count=0, until=None)
        until, count, after = key_of(first.tasks[0]), 0, None
        while True:  # oldest first up to the newest match, a block of records at a time
            block = store.find(queue.host.name, queue.name, selection, newest_first=False,
                               limit=COUNT_BLOCK, budget=COUNT_BLOCK, after=after,
                               until=until)  # fmt: skip
            count += len(block.tasks)
            if block.next_after is None:
                return Plan(count=count, until=until)
            after = block.next_after
    except NotFound:
        return Plan(count=0, until=None)


def apply_chunk(
    queue: Queue,
    found: Filter,
    action: str,
    *,
    by: str,
    after: OrderKey | None,
    until: OrderKey,
    tally: Tally,
    chunk: int | None = None,
) -> OrderKey | None:
    """Act on the next `chunk` tasks of the filter past `after`, up to `until`; add to `tally`.
    Returns where the next chunk starts, or None when the walk is over."""
    chunk = chunk or CHUNK
    try:
        page = get_store().find(
            queue.host.name, queue.name, found.selection(), newest_first=False,
            limit=chunk, after=after, until=until, budget=chunk * 4,
        )  # fmt: skip
    except NotFound:
        return None
    apply_to_ids(queue, [t.id for t in page.tasks], action, by=by, tally=tally)
    return page.next_after


def apply_to_ids(queue: Queue, ids: list[str], action: str, *, by: str, tally: Tally) -> None:
    for task_id in ids:
        try:
            console.act_on_task(queue, task_id, action, by=by)
        except StoreError as exc:
            tally.refused[exc.code] += 1
        else:
            tally.done += 1
