"""What the ingested events say of each queue's last day: counts per half hour, and from them
the last hour's throughput and failure rate.

One aggregate query serves every queue on the dashboard: the events of the kinds counted, over
the last 24 hours, grouped by queue, kind and half hour, read from the index
(host, queue, event, t) alone. Nothing here reads a task file or walks the events one by one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import BigIntegerField, Count, ExpressionWrapper, F, Value

from tasklogs.models import TaskEvent

DAY_SECONDS = 86_400
BUCKET_SECONDS = 1_800
BUCKETS = DAY_SECONDS // BUCKET_SECONDS
HOUR_BUCKETS = 3_600 // BUCKET_SECONDS
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


@dataclass(frozen=True, kw_only=True)
class Activity:
    """One queue's last 24 hours from Task Logs, per half hour, oldest first; `end` is the
    moment (unix seconds) the last interval ends."""

    end: int
    posted: Series = (0,) * BUCKETS
    finished: Series = (0,) * BUCKETS
    failed: Series = (0,) * BUCKETS
    cancelled: Series = (0,) * BUCKETS

    @property
    def quiet(self) -> bool:
        """No event of the kinds counted in the whole day."""
        return not any(map(any, (self.posted, self.finished, self.failed, self.cancelled)))

    @property
    def ended_last_hour(self) -> int:
        """Tasks that finished or failed in the last hour: the queue's throughput."""
        return sum(self.finished[-HOUR_BUCKETS:]) + sum(self.failed[-HOUR_BUCKETS:])

    @property
    def failure_rate(self) -> float | None:
        """The share of the last hour's endings that were failures; None without endings."""
        ended = self.ended_last_hour
        return sum(self.failed[-HOUR_BUCKETS:]) / ended if ended else None

    def totals(self) -> dict[str, int]:
        return {
            "posted_day": sum(self.posted),
            "finished_day": sum(self.finished),
            "failed_day": sum(self.failed),
            "cancelled_day": sum(self.cancelled),
        }


def activity(queues: Iterable[tuple[str, str]], *, now_s: int) -> dict[tuple[str, str], Activity]:
    """Each queue's Activity for the 24 hours up to `now_s`, from one query.

    The filter names the hosts and the queue names as two lists: each (host, queue, event)
    combination is then one range of the index. A combination that is not one of `queues` (a
    queue of the same name on another host) is counted by the database and dropped here."""
    wanted = set(queues)
    if not wanted:
        return {}
    # (now - t) / width with integers: the interval counted back from now, 0 the newest.
    back = ExpressionWrapper(
        (Value(now_s) - F("t")) / Value(BUCKET_SECONDS), output_field=BigIntegerField()
    )
    rows = (
        TaskEvent.objects.filter(
            host__in={host for host, _ in wanted},
            queue__in={queue for _, queue in wanted},
            event__in=LINES,
            t__gt=now_s - DAY_SECONDS,
            t__lte=now_s,
        )
        .annotate(back=back)
        .values_list("host", "queue", "event", "back")
        .annotate(n=Count("*"))
        .order_by()  # the model's ordering would join the GROUP BY
    )
    counts: dict[tuple[str, str], dict[str, list[int]]] = {}
    for host, queue, event, back_index, n in rows:
        if (host, queue) not in wanted:
            continue
        lines = counts.setdefault((host, queue), {name: [0] * BUCKETS for name in _LINE_NAMES})
        lines[LINES[event]][BUCKETS - 1 - back_index] += n
    return {
        key: Activity(end=now_s, **{name: tuple(v) for name, v in counts[key].items()})
        if key in counts
        else Activity(end=now_s)
        for key in wanted
    }
