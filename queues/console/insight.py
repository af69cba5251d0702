"""Where a queue's time goes, from the ingested events: how long its tasks wait to be claimed,
run, and wait to be read, p50 and p95 over the last hour and the last day; and the results of
the last day that nobody read.

Everything is bounded whatever the queue's volume. The percentiles are computed here, in
Python, over a sample of at most HOUR_SAMPLE durations for the hour and PER_STRATUM for each
four hours of the day (the newest ends of each), weighted by how many ends each stratum really
had, so a busy last hour does not stand for the whole day. The same code runs on SQLite and
PostgreSQL (no percentile_cont). Each duration is one end event and, by a correlated subquery
on the (task_id, at, id) index, the latest start event of the same task before it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    Count,
    Exists,
    F,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)

from queues.console.activity import DAY_SECONDS, Activity, activity
from queues.models import Queue
from tasklogs.health import IngestLag, ingest_lag
from tasklogs.models import TaskEvent

HOUR_SECONDS = 3_600
STRATUM_SECONDS = 4 * 3_600
STRATA = DAY_SECONDS // STRATUM_SECONDS
HOUR_SAMPLE = 500
PER_STRATUM = 150
SAMPLING = (
    f"A busy queue is sampled: up to the newest {HOUR_SAMPLE:,} of the last hour, and up to "
    f"{PER_STRATUM:,} of each {STRATUM_SECONDS // 3_600} hours of the day, weighted by how many "
    "each of those had."
)
UNREAD_SHOWN = 50
UNREAD_SCAN = 3_000  # the newest results of the day looked at for a read
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
        span="posted (or put back by a lapsed lease, an operator or a retry) to claimed; "
        "includes any delay the producer or the backoff asked for",
        ends=("claimed",),
        starts=("posted", "requeue", "requeued", "retried"),
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
    # Some window held more ends than its sample takes: the figures are an estimate, and the
    # page says so (the hour and the day of the same tasks may then differ).
    sampled: bool = False


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
    counts = _end_counts(events, now_s)
    measures = []
    for m in MEASURES:
        hour, day = _samples(events, m, counts, now_s)
        measures.append(MeasureReport(measure=m, hour=_percentiles(hour), day=_percentiles(day)))
    results_day = sum(counts["result"].strata) if "result" in counts else 0
    unread, more = unread_results(host, name, now_s=now_s)
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


# (duration ms, weight) pairs; ends counted; whether a window had more ends than it sampled
Sample = tuple[list[tuple[int, float]], int, bool]


@dataclass(frozen=True, kw_only=True)
class EndCounts:
    """How many end events of one kind the last hour and each stratum of the day had."""

    hour: int
    strata: tuple[int, ...]  # the newest stratum first


def _end_counts(events: QuerySet[TaskEvent], now_s: int) -> dict[str, EndCounts]:
    """The day's end events per kind, in the last hour and in each stratum: one pass over the
    index range, grouped by kind alone (the index's own order: no sort), with a conditional
    sum per boundary. A GROUP BY on the stratum instead would sort every row first."""
    bounds = {
        "hour": now_s - HOUR_SECONDS,
        **{f"after_{k}": now_s - k * STRATUM_SECONDS for k in range(1, STRATA)},
    }
    after = {
        name: Sum(Case(When(t__gt=bound, then=1), default=0, output_field=IntegerField()))
        for name, bound in bounds.items()
    }
    rows = (
        events.filter(event__in=END_EVENTS, t__gt=now_s - DAY_SECONDS, t__lte=now_s)
        .values("event")
        .annotate(day=Count("*"), **after)
        .order_by()
    )
    found = {}
    for row in rows:
        # after_k: the ends newer than k strata back; stratum k lies between after_k and after_k+1.
        newer = [0] + [row[f"after_{k}"] for k in range(1, STRATA)] + [row["day"]]
        strata = tuple(newer[k + 1] - newer[k] for k in range(STRATA))
        found[row["event"]] = EndCounts(hour=row["hour"], strata=strata)
    return found


_NONE = EndCounts(hour=0, strata=(0,) * STRATA)


def _samples(
    events: QuerySet[TaskEvent], m: Measure, counts: dict[str, EndCounts], now_s: int
) -> tuple[Sample, Sample]:
    """The measure's weighted durations over the last hour and over the last day."""
    hour: list[tuple[int, float]] = []
    day: list[tuple[int, float]] = []
    hour_ends = day_ends = 0
    hour_sampled = day_sampled = False
    for end in m.ends:
        durations = _durations(events, m, end)
        counted = counts.get(end, _NONE)
        if counted.hour:
            hour_ends += counted.hour
            hour_sampled |= counted.hour > HOUR_SAMPLE
            sample = _window(durations, now_s - HOUR_SECONDS, now_s, HOUR_SAMPLE)
            hour += _weighted(sample, counted.hour)
        for k, count in enumerate(counted.strata):
            if count:
                day_ends += count
                day_sampled |= count > PER_STRATUM
                hi = now_s - k * STRATUM_SECONDS
                sample = _window(durations, hi - STRATUM_SECONDS, hi, PER_STRATUM)
                day += _weighted(sample, count)
    return (hour, hour_ends, hour_sampled), (day, day_ends, day_sampled)


def _weighted(durations: list[int], count: int) -> list[tuple[int, float]]:
    """Each sampled duration stands for count / len(durations) of the stratum's ends."""
    weight = count / len(durations) if durations else 0.0
    return [(d, weight) for d in durations]


def _durations(events: QuerySet[TaskEvent], m: Measure, end: str) -> QuerySet[TaskEvent]:
    """The `end` events, newest first, each with `took`: the milliseconds since the latest of
    the measure's start events of the same task at or before it (null when none was ingested).
    Built once per measure and end: each window only adds its range to it."""
    start = (
        task_events(
            m.starts, host=OuterRef("host"), queue=OuterRef("queue"), task_id=OuterRef("task_id")
        )
        .filter(at__lte=OuterRef("at"))
        .order_by("-at", "-id")
        .values("at")[:1]
    )
    took = EpochMs(F("at")) - EpochMs(Subquery(start))
    return events.filter(event=end).order_by("-t").annotate(took=took)


def _window(durations: QuerySet[TaskEvent], lo: int, hi: int, limit: int) -> list[int]:
    """Up to `limit` durations (ms) of the newest ends in (lo, hi]."""
    rows = durations.filter(t__gt=lo, t__lte=hi).values_list("took", flat=True)[:limit]
    return [ms for ms in rows if ms is not None]


class EpochMs(Func):
    """A moment as integer milliseconds since the epoch, computed by the database: a duration
    is then a subtraction there, and no row's datetimes are built in Python."""

    output_field = BigIntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Django keeps SQLite datetimes as ISO text in UTC, which julianday() reads.
        template = "CAST(ROUND((julianday(%(expressions)s) - 2440587.5) * 86400000) AS INTEGER)"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "CAST(ROUND(EXTRACT(EPOCH FROM %(expressions)s) * 1000) AS BIGINT)"
        return self.as_sql(compiler, connection, template=template, **extra)


def task_events(
    kinds: tuple[str, ...], *, host: str | OuterRef, queue: str | OuterRef, **task: object
) -> QuerySet[TaskEvent]:
    """The events of the kinds given of the tasks `task` names (task_id=..., task_id__in=...).

    Only task_id and at are compared as columns: the one index that can then serve is
    (task_id, at, id), a few rows per task. Offered `event = ?` too, a planner without
    statistics (SQLite, never ANALYZEd here) takes the (event, at) index instead and walks
    every such event ever logged, for each task. So kind, host and queue are matched in a CASE,
    which no index serves."""
    wanted = Case(
        When(Q(event__in=kinds, host=host, queue=queue), then=Value(True)),
        default=Value(False),
        output_field=BooleanField(),
    )
    return TaskEvent.objects.filter(**task).alias(wanted=wanted).filter(wanted=True)


def _percentiles(sample: Sample) -> Percentiles:
    pairs, ends, sampled = sample
    return Percentiles(
        ends=ends,
        sampled=sampled,
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


def unread_results(host: str, queue: str, *, now_s: int) -> tuple[list[UnreadResult], bool]:
    """The newest results of the last day with no `fetched` after them (a finished task is read
    at most once per result), among the newest UNREAD_SCAN results; and whether there are more
    than UNREAD_SHOWN of them."""
    read = task_events(
        ("fetched",), host=OuterRef("host"), queue=OuterRef("queue"), task_id=OuterRef("task_id")
    ).filter(at__gte=OuterRef("at"))
    newest = TaskEvent.objects.filter(
        host=host,
        queue=queue,
        event="result",
        t__gt=now_s - DAY_SECONDS,
        t__lte=now_s - UNREAD_GRACE_SECONDS,
    ).order_by("-t")
    rows = list(
        TaskEvent.objects.filter(pk__in=newest.values("pk")[:UNREAD_SCAN])
        .exclude(Exists(read))
        .order_by("-t", "-id")
        .values_list("task_id", "at")[: UNREAD_SHOWN + 1]
    )
    shown = rows[:UNREAD_SHOWN]
    ids = [task_id for task_id, _ in shown]
    cleaned = set(
        task_events(("cleaned",), host=host, queue=queue, task_id__in=ids).values_list(
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
