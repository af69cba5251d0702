"""Every figure /metrics reads, from where it lives: the configured queues, each queue's store
counts, and Task Logs' events. The one module of queues/metrics that reaches the store and the
console database, so a change in how callers reach them is fixed here alone.

The event counters are exact totals over Task Logs, kept cheap by counting each row once per
process: a settled total up to a row id, in Django's cache, advanced by the rows ingested since
(ids grow with ingestion, so a line ingested late, whatever its time, is still counted). The
rows of the last SETTLE_SECONDS are counted on every scrape and settled only once older: a
PostgreSQL id can commit after a higher one, and a row settled past is never counted again.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, Max, OuterRef, QuerySet, Subquery

from queues import stores
from queues.console.insight import EpochMs, task_events
from queues.console.recent import workers_seen
from queues.models import Queue
from queues.store import NotFound, QueueStats, State
from tasklogs.health import ingest_lag
from tasklogs.models import TaskEvent

logger = logging.getLogger(__name__)
Key = tuple[str, str]  # (host, queue)
EventKey = tuple[str, str, str]  # (host, queue, event)
SETTLE_SECONDS = 60
COLD_MARGIN = 10_000  # ids a first scrape leaves unsettled (counted on every scrape till then)
SETTLED_CACHE_SECONDS = 7 * 86_400
SETTLED_KEY = "taskhoster:metrics:settled"
WINDOW_SECONDS = 300  # the histograms' window: the ends of the last five minutes
# The ends timed per scrape and measure: the site's newest SAMPLE in the window, and at most
# PER_QUEUE of a queue that sample missed. A queue's buckets scale its sample to its count.
SAMPLE = 2_000
PER_QUEUE = 100
# the sweep's events when it finds a lease over: a requeue, or the task ended in one of the
# store's states (its budget spent, or a cancel asked for)
LAPSE_EVENTS = ("requeue", State.FAILED.value, State.CANCELLED.value)
WAIT_STARTS = ("posted", "requeue", "requeued", "retried")
WAIT_ENDS = ("claimed",)
RUN_STARTS = ("claimed",)
RUN_ENDS = ("result", "failed")


NOTHING = QueueStats(pending=0, processing=0, done=0, delayed=0, retrying=0, oldest_pending_ms=0)


@dataclass(frozen=True)
class Configured:
    queue_seconds: int  # the queue timeout
    store: str  # which store holds its tasks: "files" or "postgres"


def configured_queues() -> dict[Key, Configured]:
    """Every queue the console knows, by host and name, with its timeout and its store."""
    rows = Queue.objects.values_list("host__name", "name", "queue_seconds", "store")
    return {(host, name): Configured(timeout, kind) for host, name, timeout, kind in sorted(rows)}


def queue_stats(queues: dict[Key, Configured], *, now_ms: int) -> dict[Key, QueueStats | None]:
    """Each queue's counts from its store (files or PostgreSQL); None where its store could
    not answer (unreachable, refused): that queue's gauges are left out of the scrape. The
    store is the one `queues` names: the router would look each queue's up again."""
    router = stores.router()
    found: dict[Key, QueueStats | None] = {}
    for (host, name), configured in queues.items():
        try:
            found[(host, name)] = router.backend(configured.store).stats(host, name, now=now_ms)
        except NotFound:  # configured, never posted to: nothing in it yet
            found[(host, name)] = NOTHING
        except Exception:  # one queue's store failing must not blank every other figure
            logger.warning("metrics: the store of %s/%s did not answer", host, name, exc_info=True)
            found[(host, name)] = None
    return found


@dataclass(frozen=True, kw_only=True)
class EventTotals:
    """All-time counts from Task Logs: events per (host, queue, event), lease lapses per queue."""

    events: dict[EventKey, int] = field(default_factory=dict)
    lapses: dict[Key, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class _Settled:
    upto_id: int  # rows with id <= upto_id are counted in `totals`
    totals: EventTotals
    # (unix seconds seen, the highest id then): the next watermarks, once SETTLE_SECONDS old
    seen: tuple[tuple[float, int], ...] = ()


def event_totals(*, now_s: float | None = None) -> EventTotals:
    """Every event Task Logs holds, counted: the settled total plus the rows past it."""
    now_s = time.time() if now_s is None else now_s
    top = TaskEvent.objects.aggregate(top=Max("id"))["top"] or 0
    settled: _Settled | None = cache.get(SETTLED_KEY)
    if settled is None:
        # A process's first scrape counts every row once. All but the newest COLD_MARGIN ids
        # settle at once: a row still uncommitted now has one of the newest ids.
        upto = max(top - COLD_MARGIN, 0)
        counted = _count(TaskEvent.objects.filter(id__lte=upto)) if upto else EventTotals()
        settled = _Settled(upto_id=upto, totals=counted, seen=((now_s, top),))
    total = _add(settled.totals, _count_ids(settled.upto_id, None))
    seen = (*settled.seen, (now_s, top))
    ready = [upto for when, upto in seen if when <= now_s - SETTLE_SECONDS]
    if ready and max(ready) > settled.upto_id:
        upto = max(ready)
        settled = _Settled(
            upto_id=upto, totals=_add(settled.totals, _count_ids(settled.upto_id, upto)),
            seen=tuple(s for s in seen if s[1] > upto),
        )  # fmt: skip
    elif not settled.seen or now_s - settled.seen[-1][0] >= SETTLE_SECONDS / 4:
        # One watermark per quarter of SETTLE_SECONDS: a scrape every second keeps a short list.
        settled = _Settled(upto_id=settled.upto_id, totals=settled.totals, seen=seen)
    cache.set(SETTLED_KEY, settled, SETTLED_CACHE_SECONDS)
    return total


def _count_ids(after: int, upto: int | None) -> EventTotals:
    """_count of the rows with after < id <= upto (no bound: None), read by the primary key.
    SQLite, without statistics, would rather walk the whole (host, queue, event, t) index for
    the GROUP BY's order and test each id; NOT INDEXED leaves it the rowid range alone."""
    if connection.vendor != "sqlite":
        rows = TaskEvent.objects.filter(id__gt=after)
        return _count(rows.filter(id__lte=upto) if upto is not None else rows)
    with connection.cursor() as cursor:
        if upto is None:
            cursor.execute(_COUNT_AFTER_ID, [after])
        else:
            cursor.execute(_COUNT_BETWEEN_IDS, [after, upto])
        return _totals(cursor.fetchall())


# Whole literals, no SQL built from strings; the table is TaskEvent's (a test holds them to it).
EVENTS_TABLE = "tasklogs_taskevent"
_COUNT_AFTER_ID = (
    'SELECT host, queue, event, COUNT(*), SUM(lapsed) FROM "tasklogs_taskevent" NOT INDEXED'
    " WHERE id > %s GROUP BY host, queue, event"
)
_COUNT_BETWEEN_IDS = (
    'SELECT host, queue, event, COUNT(*), SUM(lapsed) FROM "tasklogs_taskevent" NOT INDEXED'
    " WHERE id > %s AND id <= %s GROUP BY host, queue, event"
)


def _count(rows: QuerySet[TaskEvent]) -> EventTotals:
    """Events per (host, queue, event), read from the (host, queue, event, t) index alone, and
    the lapsed ones per queue, from the rows of the kinds a lapse is written on."""
    events = rows.values_list("host", "queue", "event").annotate(n=Count("*")).order_by()
    lapsed = (
        rows.filter(event__in=LAPSE_EVENTS, lapsed=True)
        .values_list("host", "queue")
        .annotate(n=Count("*"))
        .order_by()
    )
    found = _totals((host, queue, event, n, 0) for host, queue, event, n in events)
    return EventTotals(events=found.events, lapses={(h, q): n for h, q, n in lapsed})


def _totals(grouped: Iterable[tuple[str, str, str, int, int | None]]) -> EventTotals:
    events: dict[EventKey, int] = {}
    lapses: Counter[Key] = Counter()
    for host, queue, event, n, lapsed_n in grouped:
        events[(host, queue, event)] = n
        if lapsed_n:
            lapses[(host, queue)] += lapsed_n
    return EventTotals(events=events, lapses=dict(lapses))


def _add(a: EventTotals, b: EventTotals) -> EventTotals:
    events = Counter(a.events)
    events.update(b.events)
    lapses = Counter(a.lapses)
    lapses.update(b.lapses)
    return EventTotals(events=dict(events), lapses=dict(lapses))


@dataclass(frozen=True, kw_only=True)
class WindowDurations:
    """One measure's ends in the window of one queue: how many, and the seconds of a sample
    of the newest (an end whose start Task Logs does not hold is left out of the sample)."""

    ends: int
    seconds: list[float]


def window_durations(
    *, now_s: int, window_s: int = WINDOW_SECONDS
) -> dict[str, dict[Key, WindowDurations]]:
    """Per measure ("wait", "run") and queue, the ends of the last `window_s` seconds: one
    GROUP BY over them for their counts; then per measure one query timing the site's newest
    SAMPLE ends, and for a queue with ends none of which that sample holds (a quiet queue
    beside busy ones), one query timing up to PER_QUEUE of its own."""
    # On `at`, not `t`: the (event, at, id) index then serves the range, and its order the sample.
    since, until = _moment(now_s - window_s), _moment(now_s + 1)
    ends = (
        TaskEvent.objects.filter(event__in=WAIT_ENDS + RUN_ENDS, at__gte=since, at__lt=until)
        .values_list("host", "queue", "event")
        .annotate(n=Count("*"))
        .order_by()
    )
    counts: dict[str, Counter[Key]] = {"wait": Counter(), "run": Counter()}
    for host, queue, event, n in ends:
        counts["wait" if event in WAIT_ENDS else "run"][(host, queue)] += n
    measures = {"wait": (WAIT_STARTS, WAIT_ENDS), "run": (RUN_STARTS, RUN_ENDS)}
    found: dict[str, dict[Key, WindowDurations]] = {}
    for name, (starts, end_kinds) in measures.items():
        if not counts[name]:
            found[name] = {}
            continue
        window = TaskEvent.objects.filter(event__in=end_kinds, at__gte=since, at__lt=until)
        timed = _timed(window, starts, SAMPLE)
        for key in counts[name].keys() - timed.keys():
            mine = window.filter(host=key[0], queue=key[1])
            timed[key] = _timed(mine, starts, PER_QUEUE).get(key, [])
        found[name] = {
            key: WindowDurations(ends=n, seconds=timed.get(key, []))
            for key, n in counts[name].items()
        }
    return found


def _moment(unix_s: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(unix_s, dt.UTC)


def _timed(
    ends: QuerySet[TaskEvent], starts: tuple[str, ...], limit: int
) -> dict[Key, list[float]]:
    """Per queue, the seconds from each of the newest `limit` ends back to the latest start
    of its task (an end whose start Task Logs does not hold is left out)."""
    start = (
        task_events(starts, host=OuterRef("host"), queue=OuterRef("queue"),
                    task_id=OuterRef("task_id"))
        .filter(at__lte=OuterRef("at"))
        .order_by("-at", "-id")
        .values("at")[:1]
    )  # fmt: skip
    took = EpochMs(F("at")) - EpochMs(Subquery(start))
    rows = ends.order_by("-at").annotate(took=took).values_list("host", "queue", "took")[:limit]
    found: dict[Key, list[float]] = {}
    for host, queue, ms in rows:
        seconds = found.setdefault((host, queue), [])
        if ms is not None:
            seconds.append(max(ms, 0) / 1000)
    return found


def workers(queues: Iterable[Key], *, now_s: int) -> dict[Key, int]:
    """Per queue, the distinct workers that claimed or reported in the last 15 minutes."""
    return workers_seen(queues, now_s=now_s)


@dataclass(frozen=True, kw_only=True)
class Lag:
    bytes: int  # event-log bytes written and not ingested yet
    seconds: int  # age of the oldest line not ingested; 0 when none waits


def ingester_lag(*, now_s: int) -> Lag:
    """How far Task Logs' ingester is behind this machine's event log."""
    lag = ingest_lag(Path(settings.TASKHOSTER_LOGS_DIR) / "tasks", now_s=now_s, stale_seconds=-1)
    if lag is None:
        return Lag(bytes=0, seconds=0)
    return Lag(bytes=lag.unread_bytes, seconds=max(now_s - lag.oldest_t, 0))
