"""The metric families of one scrape, built from sources.py's figures: a prometheus_client
collector run afresh for each request (nothing is counted in process memory)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from . import sources

QUEUE_LABELS = ["host", "queue"]
# Seconds: from a claim within a tick to tasks that wait or run for hours.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3_600, 21_600, 86_400)
HISTOGRAMS = {
    "wait": ("taskhoster_wait_seconds",
             "Seconds from posted (or put back) to claimed, of the claims of the last 5 minutes."),
    "run": ("taskhoster_run_seconds",
            "Seconds from claimed to the worker's result or failure, of the ends of the last "
            "5 minutes."),
}  # fmt: skip


class StoreFigures(Collector):
    """Every family /metrics exposes, computed when collected."""

    def __init__(self, *, now_ms: int | None = None) -> None:
        self.now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms

    def collect(self) -> Iterator[Metric]:
        now_s = self.now_ms // 1000
        queues = sources.configured_queues()
        timeout = GaugeMetricFamily(
            "taskhoster_queue_timeout_seconds",
            "The queue's timeout: a task older than this fails with error 'timeout'.",
            labels=QUEUE_LABELS,
        )
        for (host, queue), configured in queues.items():
            timeout.add_metric([host, queue], configured.queue_seconds)
        yield timeout
        yield from _store_families(sources.queue_stats(queues, now_ms=self.now_ms))
        yield from _event_families(sources.event_totals())
        yield from _histograms(sources.window_durations(now_s=now_s))
        seen = GaugeMetricFamily(
            "taskhoster_workers_seen",
            "Distinct workers that claimed or reported in the last 15 minutes.",
            labels=QUEUE_LABELS,
        )
        for (host, queue), n in sorted(sources.workers(queues, now_s=now_s).items()):
            seen.add_metric([host, queue], n)
        yield seen
        yield from _lag_families(sources.ingester_lag(now_s=now_s))


def _store_families(stats: dict[sources.Key, sources.QueueStats | None]) -> Iterator[Metric]:
    tasks = GaugeMetricFamily(
        "taskhoster_tasks",
        "Tasks in the store now, by state; delayed and retrying are pending tasks not "
        "claimable yet (a delay asked for, a retry's backoff).",
        labels=[*QUEUE_LABELS, "state"],
    )
    oldest = GaugeMetricFamily(
        "taskhoster_oldest_pending_age_seconds",
        "Age of the queue's oldest pending task; 0 when none is pending.",
        labels=QUEUE_LABELS,
    )
    up = GaugeMetricFamily(
        "taskhoster_store_up", "1 when the queue's store answered this scrape, else 0.",
        labels=QUEUE_LABELS,
    )  # fmt: skip
    for (host, queue), s in sorted(stats.items()):
        up.add_metric([host, queue], 0 if s is None else 1)
        if s is None:
            continue
        for state in ("pending", "delayed", "retrying", "processing", "done"):
            tasks.add_metric([host, queue, state], getattr(s, state))
        oldest.add_metric([host, queue], s.oldest_pending_ms / 1000)
    yield from (tasks, oldest, up)


def _event_families(totals: sources.EventTotals) -> Iterator[Metric]:
    events = CounterMetricFamily(
        "taskhoster_events",
        "Events in Task Logs, all time, by kind (posted, claimed, result, failed, timeout, "
        "requeue, cancelled, ...).",
        labels=[*QUEUE_LABELS, "event"],
    )
    for (host, queue, event), n in sorted(totals.events.items()):
        events.add_metric([host, queue, event], n)
    lapses = CounterMetricFamily(
        "taskhoster_lease_lapses",
        "Attempts the sweep ended because the lease ran out before the worker reported.",
        labels=QUEUE_LABELS,
    )
    for (host, queue), n in sorted(totals.lapses.items()):
        lapses.add_metric([host, queue], n)
    yield from (events, lapses)


def _histograms(found: dict[str, dict[sources.Key, sources.WindowDurations]]) -> Iterator[Metric]:
    """Gauge histograms: the distribution of the window's ends, not a running count, so
    histogram_quantile reads a p95 straight from the buckets (no rate())."""
    for measure, (name, doc) in HISTOGRAMS.items():
        family = GaugeHistogramMetricFamily(name, doc, labels=QUEUE_LABELS)
        for (host, queue), window in sorted(found[measure].items()):
            buckets, total = bucketed(window)
            family.add_metric([host, queue], buckets, gsum_value=total)
        yield family


def bucketed(window: sources.WindowDurations) -> tuple[list[tuple[str, float]], float]:
    """Cumulative bucket counts and the sum of seconds, the sample scaled up to every end
    counted when the window had more ends than were timed."""
    timed = sorted(window.seconds)
    scale = window.ends / len(timed) if timed else 0.0
    buckets = [(_le(bound), round(bisect.bisect_right(timed, bound) * scale)) for bound in BUCKETS]
    buckets.append(("+Inf", window.ends if timed else 0))
    return buckets, sum(timed) * scale


def _le(bound: float) -> str:
    return str(float(bound))


def _lag_families(lag: sources.Lag) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "taskhoster_ingest_lag_bytes",
        "Event-log bytes this machine wrote that Task Logs has not ingested yet.",
        value=lag.bytes,
    )
    yield GaugeMetricFamily(
        "taskhoster_ingest_lag_seconds",
        "Age of the oldest event line not ingested yet; 0 when the ingester keeps up.",
        value=lag.seconds,
    )
