"""The bulk actions' steps, one per request: count and ask to confirm, then one chunk at a time
until the walk is over (bulk.py does the work; bulk_form.py reads and writes the fields)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from queues.console import bulk
from queues.console.bulk_form import BulkRequest
from queues.models import Queue


@dataclass(frozen=True, kw_only=True)
class Step:
    kind: str  # "confirm": show the count; "continue": post the next chunk; "done"
    count: int = 0  # the tasks the action would touch (confirm)
    fields: list[tuple[str, str]]  # the hidden fields of the next post (confirm, continue)


def next_step(queue: Queue, asked: BulkRequest, *, by: str) -> Step:
    if not asked.confirmed:
        if asked.scope == "selected":
            asked.tally.counted = len(asked.ids)
            return Step(kind="confirm", count=len(asked.ids), fields=asked.fields())
        plan = bulk.plan(queue, asked.filter)
        asked.tally.counted = plan.count
        counted = replace(asked, until=plan.until, cutoff=plan.cutoff)
        return Step(kind="confirm", count=plan.count, fields=counted.fields())
    if asked.scope == "selected":
        bulk.apply_to_ids(queue, asked.ids, asked.action, by=by, tally=asked.tally)
        return Step(kind="done", fields=[])
    # BulkRequest refuses a confirmed filter without them
    assert asked.until is not None and asked.cutoff is not None
    after = bulk.apply_chunk(queue, asked.filter, asked.action, by=by, after=asked.after,
                             until=asked.until, cutoff=asked.cutoff, tally=asked.tally)  # fmt: skip
    if after is None:
        return Step(kind="done", fields=[])
    return Step(kind="continue", fields=asked.fields(after=after))
