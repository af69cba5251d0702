"""Where a queue's time goes, from the ingested events: how long its tasks wait to be claimed,
run, and wait to be read, p50 and p95 over the last hour and the last day; and the results of
the last day that nobody read.

Everything is bounded whatever the queue's volume. The percentiles are computed here, in
Python, over a sample of at most HOUR_SAMPLE durations for the hour and PER_STRATUM for each
two hours of the day (the newest ends of each), weighted by how many ends each stratum really
had, so a busy last hour does not stand for the whole day. The same code runs on SQLite and
PostgreSQL (no percentile_cont). Each duration is one end event and, by a correlated subquery
on the (task_id, at, id) index, the latest start event of the same task before it.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db.models import (
    BigIntegerField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
)

from queues.activity import DAY_SECONDS, Activity, activity
from queues.models import Queue
from tasklogs.health import IngestLag, ingest_lag
from tasklogs.models import TaskEvent

HOUR_SECONDS = 3_600
STRATUM_SECONDS = 7_200
STRATA = DAY_SECONDS // STRATUM_SECONDS
HOUR_SAMPLE = 1_000
PER_STRATUM = 200
UNREAD_SHOWN = 50
UNREAD_SCAN = 5_000  # the newest results of the day looked at for a read
UNREAD_GRACE_SECONDS = 60  # a result this fresh is not "unread" yet: its producer may be on the way
TERMINAL = ("result", "failed", "timeout", "cancelled")


@dataclass(frozen=True, kw_only=True)
class Measure:
    name: str
    title: str
    span: str  # from which event to which, in words
    ends: tuple[str, ...]
    starts: tuple[str, ...]


MEASURES = (
    Measure(
        name="wait",
        title="Wait to be claimed",
        span="posted (or put back by a lapsed lease or a retry) to claimed; "
        "includes any delay the producer or the backoff asked for",
        ends=("claimed",),
        starts=("posted", "requeue", "retried"),
    ),
    Measure(
        name="run",
        title="Run",
        span="claimed to the worker's result or failure",
        ends=("result", "failed"),
        starts=("claimed",),
    ),
    Measure(
        name="read",
        title="Wait to be read",
        span="finished, failed or cancelled to the producer's first read of it",
        ends=("fetched",),
        starts=TERMINAL,
    ),
)
END_EVENTS = tuple(dict.fromkeys(e for m in MEASURES for e in m.ends))


@dataclass(frozen=True, kw_only=True)
class Percentiles:
    ends: int  # end events in the window (all of them, counted)
    measured: int  # durations in the sample (an end whose start was never ingested is left out)
    p50_ms: int | None
    p95_ms: int | None


@dataclass(frozen=True, kw_only=True)
class MeasureReport:
    measure: Measure
    hour: Percentiles
    day: Percentiles


@dataclass(frozen=True, kw_only=True)
class UnreadResult:
    task_id: str
    finished_at: dt.datetime
    cleaned: bool  # the store has deleted it: nobody will ever read this result now
    age_ms: int  # how long ago it finished


@dataclass(frozen=True, kw_only=True)
class QueueInsight:
    now_s: int
    measures: list[MeasureReport]
    unread: list[UnreadResult]  # newest first
    unread_more: bool  # more unread results than shown
    results_day: int
    results_looked_at: int
    activity: Activity
    lag: IngestLag | None  # Task Logs is behind the store: these numbers stop at lag.oldest_t


def queue_insight(queue: Queue, *, now_ms: int) -> QueueInsight:
    now_s = now_ms // 1000
    host, name = queue.host.name, queue.name
    events = TaskEvent.objects.filter(host=host, queue=name)
    hourly = _hourly_counts(events, now_s)
    measures = [
        MeasureReport(
            measure=m,
            hour=_percentiles(_hour_sample(events, m, hourly, now_s)),
            day=_percentiles(_day_sample(events, m, hourly, now_s)),
        )
        for m in MEASURES
    ]
    results_day = sum(hourly["result"].values())
    unread, more = unread_results(events, now_s=now_s)
    return QueueInsight(
        now_s=now_s,
        measures=measures,
        unread=unread,
        unread_more=more,
        results_day=results_day,
        results_looked_at=min(results_day, UNREAD_SCAN),
        activity=activity([(host, name)], now_s=now_s)[(host, name)],
        lag=ingest_lag(Path(settings.TASKHOSTER_LOGS_DIR) / "tasks", now_s=now_s),
    )


Counts = dict[str, dict[int, int]]  # event -> hours back from now (0: the last hour) -> count
Sample = tuple[list[tuple[int, float]], int]  # (duration ms, weight) pairs; ends counted


def _hourly_counts(events: QuerySet[TaskEvent], now_s: int) -> Counts:
    """The day's end events per kind and hour: one GROUP BY over the index, no row read."""
    back = ExpressionWrapper(
        (Value(now_s) - F("t")) / Value(HOUR_SECONDS), output_field=BigIntegerField()
    )
    rows = (
        events.filter(event__in=END_EVENTS, t__gt=now_s - DAY_SECONDS, t__lte=now_s)
        .annotate(back=back)
        .values_list("event", "back")
        .annotate(n=Count("*"))
        .order_by()
    )
    counts: Counts = defaultdict(dict)
    for event, hours_back, n in rows:
        counts[event][hours_back] = n
    return counts


def _hour_sample(events: QuerySet[TaskEvent], m: Measure, hourly: Counts, now_s: int) -> Sample:
    pairs: list[tuple[int, float]] = []
    ends = 0
    for end in m.ends:
        count = hourly[end].get(0, 0)
        ends += count
        if count:
            durations = _durations(events, m, end, now_s - HOUR_SECONDS, now_s, HOUR_SAMPLE)
            pairs += _weighted(durations, count)
    return pairs, ends


def _day_sample(events: QuerySet[TaskEvent], m: Measure, hourly: Counts, now_s: int) -> Sample:
    pairs: list[tuple[int, float]] = []
    ends = 0
    per_stratum = STRATUM_SECONDS // HOUR_SECONDS
    for end in m.ends:
        for k in range(STRATA):
            count = sum(hourly[end].get(k * per_stratum + h, 0) for h in range(per_stratum))
            ends += count
            if count:
                hi = now_s - k * STRATUM_SECONDS
                durations = _durations(events, m, end, hi - STRATUM_SECONDS, hi, PER_STRATUM)
                pairs += _weighted(durations, count)
    return pairs, ends


def _weighted(durations: list[int], count: int) -> list[tuple[int, float]]:
    """Each sampled duration stands for count / len(durations) of the stratum's ends."""
    weight = count / len(durations) if durations else 0.0
    return [(d, weight) for d in durations]


def _durations(
    events: QuerySet[TaskEvent], m: Measure, end: str, lo: int, hi: int, limit: int
) -> list[int]:
    """Up to `limit` durations (ms) of the newest `end` events in (lo, hi], each measured from
    the latest of the measure's start events of the same task at or before it."""
    start = (
        TaskEvent.objects.filter(
            task_id=OuterRef("task_id"),
            host=OuterRef("host"),
            queue=OuterRef("queue"),
            event__in=m.starts,
            at__lte=OuterRef("at"),
        )
        .order_by("-at", "-id")
        .values("at")[:1]
    )
    rows = (
        events.filter(event=end, t__gt=lo, t__lte=hi)
        .order_by("-t")
        .annotate(started=Subquery(start))
        .values_list("at", "started")[:limit]
    )
    return [(at - started) // dt.timedelta(milliseconds=1) for at, started in rows if started]


def _percentiles(sample: Sample) -> Percentiles:
    pairs, ends = sample
    return Percentiles(
        ends=ends,
        measured=len(pairs),
        p50_ms=weighted_percentile(pairs, 0.50),
        p95_ms=weighted_percentile(pairs, 0.95),
    )


def weighted_percentile(pairs: list[tuple[int, float]], q: float) -> int | None:
    """The smallest value whose cumulative weight reaches q of the total (nearest rank)."""
    if not pairs:
        return None
    ordered = sorted(pairs)
    target = q * sum(w for _, w in ordered)
    reached = 0.0
    for value, weight in ordered:
        reached += weight
        if reached >= target:
            return value
    return ordered[-1][0]


def unread_results(events: QuerySet[TaskEvent], *, now_s: int) -> tuple[list[UnreadResult], bool]:
    """The newest results of the last day with no `fetched` after them (a finished task is read
    at most once per result), among the newest UNREAD_SCAN results; and whether there are more
    than UNREAD_SHOWN of them."""
    read = TaskEvent.objects.filter(
        task_id=OuterRef("task_id"),
        host=OuterRef("host"),
        queue=OuterRef("queue"),
        event="fetched",
        at__gte=OuterRef("at"),
    )
    newest = events.filter(
        event="result", t__gt=now_s - DAY_SECONDS, t__lte=now_s - UNREAD_GRACE_SECONDS
    ).order_by("-t")
    rows = list(
        TaskEvent.objects.filter(pk__in=newest.values("pk")[:UNREAD_SCAN])
        .exclude(Exists(read))
        .order_by("-t", "-id")
        .values_list("task_id", "at")[: UNREAD_SHOWN + 1]
    )
    shown = rows[:UNREAD_SHOWN]
    cleaned = set(
        events.filter(task_id__in=[task_id for task_id, _ in shown], event="cleaned").values_list(
            "task_id", flat=True
        )
    )
    now = dt.datetime.fromtimestamp(now_s, dt.UTC)
    unread = [
        UnreadResult(
            task_id=t,
            finished_at=at,
            cleaned=t in cleaned,
            age_ms=(now - at) // dt.timedelta(milliseconds=1),
        )
        for t, at in shown
    ]
    return unread, len(rows) > UNREAD_SHOWN
