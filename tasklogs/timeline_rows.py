"""A task timeline's rows as the page shows them: each event, the time since the one before it,
and the first line of its failure."""

from __future__ import annotations

from dataclasses import dataclass

from queues.text.durations import readable_ms

from .failure_lines import Key, failure_key
from .models import TaskEvent


@dataclass(frozen=True)
class TimelineRow:
    event: TaskEvent
    after: str  # "+1.2 s" since the row before it; "" for a page's first row
    error: str  # the first line of the failure this event tells of, "" for none


def timeline_rows(events: list[TaskEvent], lines: dict[Key, str]) -> list[TimelineRow]:
    """`events` oldest first; `lines` as failure_lines() reads them."""
    rows: list[TimelineRow] = []
    for before, event in zip([None, *events], events, strict=False):
        after = ""
        if before is not None:
            after = "+" + readable_ms(round((event.at - before.at).total_seconds() * 1000))
        rows.append(TimelineRow(event, after, lines.get(failure_key(event), "")))
    return rows
