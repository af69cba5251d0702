"""The Task Logs reads: what a user may see, a keyset page of events, one task's timeline.

Every query here starts from `visible_events(user)`: the events of the queues the user operates
(`queues.auth.access`, the one place roles are read), so no view can forget the tenant rule.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import Q, QuerySet

from queues import stores
from queues.auth.access import User, operated_queues
from queues.store.archive import is_event_payload
from queues.store.errors import StoreError
from queues.store.paths import validate_host, validate_queue, validate_task_id

from .links import payload_label, payload_url
from .models import TaskEvent
from .parsing import PAYLOAD_KINDS

PAGE_SIZE = 50
# A timeline page. The first view of a task shows its first page and its last (how it began
# and how it ended); the pages between are reached by keyset links, as in the event list.
TIMELINE_PAGE = 200
_CURSOR = re.compile(r"(\d{1,20})-(\d{1,20})", re.ASCII)


@dataclass(frozen=True, kw_only=True)
class Filters:
    host: str = ""
    queue: str = ""
    task_id: str = ""
    event: str = ""
    worker: str = ""
    since: dt.datetime | None = None
    until: dt.datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Page:
    events: list[TaskEvent]
    older: str | None  # the cursor of the next page back in time, when there is one
    newer: str | None  # the cursor of the page before this one, when this is not the first


class BadPage(ValueError):
    """A page parameter this server did not hand out."""


@dataclass(frozen=True, kw_only=True)
class Timeline:
    host: str
    queue: str
    task_id: str
    events: list[TaskEvent]  # this page, oldest first
    # On the first view of a task with events beyond its first page: its last page, shown after
    # a gap when there are events between (`later` then links to the first of them).
    last: list[TaskEvent] = field(default_factory=list)
    earlier: str | None = None  # the cursor of the page before `events`, when there is one
    later: str | None = None  # the cursor of the page after `events`, when there is one
    paged: bool = False  # a page reached by a link (not the first view)
    # (label, address) of every payload any event archived: the item, the progress lines,
    # and each attempt's result and error
    payloads: list[tuple[str, str]] = field(default_factory=list)
    current: Any = None  # the task as the store holds it now, or None when it is gone
    # an operator may re-post it: it has ended (or is gone) and the archive keeps its item
    repostable: bool = False


def visible_events(user: User) -> QuerySet[TaskEvent]:
    by_host: dict[str, list[str]] = defaultdict(list)
    for host, queue in operated_queues(user).values_list("host__name", "name"):
        by_host[host].append(queue)
    if not by_host:
        return TaskEvent.objects.none()
    return TaskEvent.objects.filter(
        reduce(or_, (Q(host=host, queue__in=queues) for host, queues in by_host.items()))
    )


def operates_any(user: User) -> bool:
    return operated_queues(user).exists()


def may_operate(user: User, host: str, queue: str) -> bool:
    return operated_queues(user).filter(host__name=host, name=queue).exists()


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICRO = dt.timedelta(microseconds=1)


def encode_cursor(event: TaskEvent) -> str:
    # Integer microseconds, not timestamp() * 1e6: a float a microsecond short would skip the
    # rows that share the cursor's instant.
    return f"{(event.at - _EPOCH) // _MICRO}-{event.pk}"


def decode_cursor(text: str) -> tuple[dt.datetime, int] | None:
    match = _CURSOR.fullmatch(text)
    if not match:
        return None
    micros, pk = int(match.group(1)), int(match.group(2))
    try:
        at = _EPOCH + micros * _MICRO
    except OverflowError:
        return None
    return at, pk


def event_page(
    user: User, filters: Filters, *, before: str = "", after: str = "", size: int = PAGE_SIZE
) -> Page:
    """One page, newest first. `before`/`after` are cursors: (at, id) of the row to go past.

    Keyset, not OFFSET: each page is a range scan of an index ending in (at, id) from the
    cursor, so page 10,000 costs what page 1 costs.
    """
    events = _filtered(visible_events(user), filters)
    if after and (key := decode_cursor(after)):
        at, pk = key
        newer = events.filter(at__gte=at).exclude(at=at, pk__lte=pk).order_by("at", "pk")
        rows = list(newer[: size + 1])
        more = len(rows) > size
        rows = rows[:size][::-1]
        return Page(events=rows, older=_cursor(rows, -1), newer=_cursor(rows, 0) if more else None)
    key = decode_cursor(before) if before else None
    if key:
        at, pk = key
        # at <= cursor bounds the index scan; the exclude only drops the cursor's own instant.
        events = events.filter(at__lte=at).exclude(at=at, pk__gte=pk)
    rows = list(events.order_by("-at", "-pk")[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return Page(
        events=rows,
        older=_cursor(rows, -1) if more else None,
        newer=_cursor(rows, 0) if key else None,
    )


def _cursor(rows: list[TaskEvent], index: int) -> str | None:
    return encode_cursor(rows[index]) if rows else None


def _filtered(events: QuerySet[TaskEvent], f: Filters) -> QuerySet[TaskEvent]:
    exact = {
        "host": f.host,
        "queue": f.queue,
        "task_id": f.task_id,
        "event": f.event,
        "worker": f.worker,
    }
    events = events.filter(**{name: value for name, value in exact.items() if value})
    if f.since:
        events = events.filter(at__gte=f.since)
    if f.until:
        events = events.filter(at__lt=f.until)
    return events


def task_timeline(
    user: User, host: str, queue: str, task_id: str, *, before: str = "", after: str = ""
) -> Timeline | None:
    """One page of a task's events in order, and the task as it is now; None when the user may
    not see it or nothing is known of it (the same answer, so a 404 says nothing).

    Without a cursor: the first page and the last. `after`/`before`: the page just after or
    just before that event. Each page is a range scan of the (task_id, at, id) index, so a
    task with a million events pages as fast as one with a thousand. BadPage: a cursor this
    server did not hand out, or both at once."""
    if after and before:
        raise BadPage("after and before together")
    key = decode_cursor(after or before) if after or before else None
    if (after or before) and key is None:
        raise BadPage(after or before)
    if not valid_names(host, queue, task_id) or not may_operate(user, host, queue):
        return None
    events = TaskEvent.objects.filter(host=host, queue=queue, task_id=task_id)
    current = current_task(host, queue, task_id)
    if key is None:
        page = _first_and_last(events)
    elif after:
        page = _page_after(events, key)
    else:
        page = _page_before(events, key)
    if not page["events"] and key is None and current is None:
        return None
    return Timeline(
        host=host,
        queue=queue,
        task_id=task_id,
        current=current,
        repostable=(current is None or current.status.terminal)
        and stores.of(host, queue).has_archived_item(host, queue, task_id),
        payloads=_payloads(events, host, queue, task_id),
        paged=key is not None,
        **page,
    )


def task_payloads(host: str, queue: str, task_id: str) -> list[tuple[str, str]]:
    """(label, address) of every payload the task's events archived. The caller has checked
    that the user operates the queue."""
    return _payloads(
        TaskEvent.objects.filter(host=host, queue=queue, task_id=task_id), host, queue, task_id
    )


def _payloads(
    events: QuerySet[TaskEvent], host: str, queue: str, task_id: str
) -> list[tuple[str, str]]:
    """Every event of the task, not just this page's: a few distinct rows at most (one per
    attempt that archived a body). Without order_by(), the model's ordering would join the
    DISTINCT and undo it."""
    rows = events.exclude(archived="").order_by().values_list("archived", "attempts", "event")
    found = set()
    for archived, attempts, event in rows.distinct():
        for kind in archived.split(","):
            if is_event_payload(kind, event):  # the task-wide files first, then by attempt
                found.add((1, attempts, PAYLOAD_KINDS.index(kind), event))
            else:
                found.add((0, 0, PAYLOAD_KINDS.index(kind), ""))
    return [
        (
            payload_label(PAYLOAD_KINDS[k], attempts=attempts, event=event),
            payload_url(host, queue, task_id, PAYLOAD_KINDS[k], attempts=attempts, event=event),
        )
        for _, attempts, k, event in sorted(found)
    ]


Key = tuple[dt.datetime, int]


def _ascending_after(events: QuerySet[TaskEvent], key: Key | None) -> QuerySet[TaskEvent]:
    if key is not None:
        at, pk = key
        events = events.filter(at__gte=at).exclude(at=at, pk__lte=pk)
    return events.order_by("at", "pk")


def _descending_before(events: QuerySet[TaskEvent], key: Key) -> QuerySet[TaskEvent]:
    at, pk = key
    return events.filter(at__lte=at).exclude(at=at, pk__gte=pk).order_by("-at", "-pk")


def _key(event: TaskEvent) -> Key:
    return event.at, event.pk


def _first_and_last(events: QuerySet[TaskEvent]) -> dict[str, Any]:
    first = list(_ascending_after(events, None)[: TIMELINE_PAGE + 1])
    if len(first) <= TIMELINE_PAGE:
        return {"events": first}
    first = first[:TIMELINE_PAGE]
    # The last page, never reaching back into the first: what lies between is the gap.
    last = list(_ascending_after(events, _key(first[-1])).reverse()[: TIMELINE_PAGE + 1])
    if len(last) <= TIMELINE_PAGE:
        return {"events": first + last[::-1]}  # nothing between: one list
    return {"events": first, "last": last[:TIMELINE_PAGE][::-1], "later": encode_cursor(first[-1])}


def _page_after(events: QuerySet[TaskEvent], key: Key) -> dict[str, Any]:
    rows = list(_ascending_after(events, key)[: TIMELINE_PAGE + 1])
    more, rows = len(rows) > TIMELINE_PAGE, rows[:TIMELINE_PAGE]
    earlier = rows and _descending_before(events, _key(rows[0])).exists()
    return {
        "events": rows,
        "earlier": encode_cursor(rows[0]) if earlier else None,
        "later": encode_cursor(rows[-1]) if more else None,
    }


def _page_before(events: QuerySet[TaskEvent], key: Key) -> dict[str, Any]:
    rows = list(_descending_before(events, key)[: TIMELINE_PAGE + 1])
    more, rows = len(rows) > TIMELINE_PAGE, rows[:TIMELINE_PAGE][::-1]
    later = rows and _ascending_after(events, _key(rows[-1])).exists()
    return {
        "events": rows,
        "earlier": encode_cursor(rows[0]) if more else None,
        "later": encode_cursor(rows[-1]) if later else None,
    }


def valid_names(host: str, queue: str, task_id: str) -> bool:
    """The store's own name rules: anything else names no task (and no file) at all."""
    try:
        validate_host(host), validate_queue(queue), validate_task_id(task_id)
    except StoreError:
        return False
    return True


def current_task(host: str, queue: str, task_id: str) -> Any:
    """The task in the store, if it is still there. Reading never stamps `fetchedAt`."""
    try:
        return stores.of(host, queue).read(host, queue, task_id)
    except StoreError:
        return None  # gone (retention), never there, or a corrupt file: the log still speaks
