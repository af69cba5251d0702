"""What the ingested events say of each queue's last day: counts per half hour, and the last
hour's throughput and failure rate.

Half hours are aligned to the clock (t // 1800); the chart's 48 end with the current one, so
far. Counting is one GROUP BY (host, queue, event, half hour) over the index
(host, queue, event, t), read from the index alone, in two parts:

- recent: the current half hour and the two before it, counted on every call (with the exact
  last 3,600 seconds beside, for the rates). A running ingester adds events here.
- settled: the 45 half hours before those, counted once per queue and half hour of the clock
  and kept in Django's cache for SETTLED_SECONDS. Their events are an hour old or more: only an
  ingester catching up adds to them, and the cache takes that in within SETTLED_SECONDS.

So a dashboard reads the last hour and a half of events, not the day's: on SQLite a GROUP BY
costs about half a microsecond per event, and a busy day is hundreds of thousands of them.
Nothing here reads a task file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.core.cache import cache
from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    IntegerField,
    QuerySet,
    Sum,
    Value,
    When,
)

from tasklogs.models import TaskEvent

DAY_SECONDS = 86_400
HOUR_SECONDS = 3_600
BUCKET_SECONDS = 1_800
BUCKETS = DAY_SECONDS // BUCKET_SECONDS
RECENT_BUCKETS = 3  # always counted afresh: at least the last hour, whatever the clock says
SETTLED_SECONDS = 300
# The events counted, and the line of the chart (the state reached) each one adds to.
LINES = {
    "posted": "posted",
    "result": "finished",
    "failed": "failed",
    "timeout": "failed",
    "cancelled": "cancelled",
}
_LINE_NAMES = tuple(dict.fromkeys(LINES.values()))
Series = tuple[int, ...]
Key = tuple[str, str]
Counts = dict[str, dict[int, int]]  # line -> half hour (t // 1800) -> events


@dataclass(frozen=True, kw_only=True)
class Activity:
    """One queue's last day from Task Logs: per half hour, oldest first, the last one the
    current half hour so far (`start`: unix seconds the first begins); and the last hour's
    endings, counted exactly."""

    start: int
    posted: Series = (0,) * BUCKETS
    finished: Series = (0,) * BUCKETS
    failed: Series = (0,) * BUCKETS
    cancelled: Series = (0,) * BUCKETS
    finished_last_hour: int = 0
    failed_last_hour: int = 0

    @property
    def quiet(self) -> bool:
        """No event of the kinds counted in the whole day."""
        return not any(map(any, (self.posted, self.finished, self.failed, self.cancelled)))

    @property
    def ended_last_hour(self) -> int:
        """Tasks that finished or failed in the last hour: the queue's throughput."""
        return self.finished_last_hour + self.failed_last_hour

    @property
    def failure_rate(self) -> float | None:
        """The share of the last hour's endings that were failures; None without endings."""
        ended = self.ended_last_hour
        return self.failed_last_hour / ended if ended else None

    def totals(self) -> dict[str, int]:
        return {
            "posted_day": sum(self.posted),
            "finished_day": sum(self.finished),
            "failed_day": sum(self.failed),
            "cancelled_day": sum(self.cancelled),
        }


def activity(queues: Iterable[Key], *, now_s: int) -> dict[Key, Activity]:
    """Each queue's Activity up to `now_s`: one query for the recent half hours, and one for
    the settled ones of the queues the cache does not hold yet."""
    wanted = set(queues)
    if not wanted:
        return {}
    current = now_s // BUCKET_SECONDS
    first, recent = current - BUCKETS + 1, current - RECENT_BUCKETS + 1
    counts = _settled(wanted, first, recent)
    last_hour: dict[Key, dict[str, int]] = {key: {} for key in wanted}
    rows = _grouped(_events(wanted, recent * BUCKET_SECONDS, now_s)).annotate(
        last_hour=Sum(
            Case(When(t__gt=now_s - HOUR_SECONDS, then=1), default=0, output_field=IntegerField())
        )
    )
    for host, queue, event, bucket, n, hour in rows:
        if (host, queue) in wanted:
            line = LINES[event]
            counts[(host, queue)][line][bucket] = counts[(host, queue)][line].get(bucket, 0) + n
            last_hour[(host, queue)][line] = last_hour[(host, queue)].get(line, 0) + hour
    span = range(first, current + 1)
    return {
        key: Activity(
            start=first * BUCKET_SECONDS,
            **{line: tuple(c.get(b, 0) for b in span) for line, c in counts[key].items()},
            finished_last_hour=last_hour[key].get("finished", 0),
            failed_last_hour=last_hour[key].get("failed", 0),
        )
        for key in wanted
    }


def _settled(wanted: set[Key], first: int, recent: int) -> dict[Key, Counts]:
    """The counts of the half hours [first, recent) per queue, from the cache or one query."""
    keys = {key: f"taskhoster:activity:{key[0]}/{key[1]}:{first}" for key in wanted}
    cached = cache.get_many(keys.values())
    counts = {key: cached[name] for key, name in keys.items() if name in cached}
    missing = wanted - counts.keys()
    for key in missing:
        counts[key] = {line: {} for line in _LINE_NAMES}
    if missing:
        rows = _grouped(_events(missing, first * BUCKET_SECONDS, recent * BUCKET_SECONDS - 1))
        for host, queue, event, bucket, n in rows:
            if (host, queue) in missing:
                line = counts[(host, queue)][LINES[event]]
                line[bucket] = line.get(bucket, 0) + n
        cache.set_many({keys[key]: counts[key] for key in missing}, SETTLED_SECONDS)
    # Copies: the recent counts are added to these, and the cache must keep its own.
    return {key: {line: dict(c) for line, c in lines.items()} for key, lines in counts.items()}


def _events(queues: set[Key], since: int, until: int) -> QuerySet[TaskEvent]:
    """The counted events of `queues` with since <= t <= until. Hosts and names go in as two
    lists: each (host, queue, event) is then one range of the index; a pair that is not one of
    `queues` (a queue of the same name on another host) is counted and dropped by the caller."""
    return TaskEvent.objects.filter(
        host__in={host for host, _ in queues},
        queue__in={queue for _, queue in queues},
        event__in=LINES,
        t__gte=since,
        t__lte=until,
    )


def _grouped(events: QuerySet[TaskEvent]) -> QuerySet[TaskEvent]:
    bucket = ExpressionWrapper(F("t") / Value(BUCKET_SECONDS), output_field=BigIntegerField())
    return (
        events.annotate(bucket=bucket)
        .values_list("host", "queue", "event", "bucket")
        .annotate(n=Count("*"))
        .order_by()  # the model's ordering would join the GROUP BY
    )
