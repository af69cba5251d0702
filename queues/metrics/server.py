"""The server's own figures, counted in process memory: each flush's duration, request
durations by route, threads held waiting, the sweep loop's passes.

A process that `start()`ed with a program name writes them to prometheus_client's
multiprocess files (multiproc.py), where /metrics reads every process's; a process that did
not (runserver, tests, a one-off command) keeps them in its own registry, which /metrics of the
same process adds. Request and flush durations are first kept in plain numbers and written to
their metric about once a second (buffered.py). The metric objects are made on first use,
after the environment names the directory: prometheus_client chooses memory or files when a
metric is made.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from queues.store import flushing

from . import buffered, multiproc

# A flush is a syncfs or an fsync: a fraction of a millisecond on an idle SSD, seconds on a
# disk that struggles.
FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SWEEP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


_lock = threading.Lock()
_registry = CollectorRegistry(auto_describe=False)
_made: dict[str, Any] = {}
_program = "web"


def start(program: str, var_dir: str | os.PathLike[str]) -> Path:
    """Count this process's figures in `<root>/<program>/` (multiproc.py; the sweep loop calls this
    as it starts; gunicorn's master does it for its workers in gunicorn.conf.py)."""
    global _program
    where = multiproc.prepare(var_dir, program)
    _program = program
    if values.ValueClass is values.MutexValue:
        # prometheus_client was imported before the directory was named: it picks memory or
        # files once, at its import, so pick again for the metrics made from now on
        values.ValueClass = values.get_value_class()
    return where


def _metric(name: str) -> Any:
    """The metric `name` of this process, made on first use: a metric without labels has a
    value from its making, and a web worker that made the sweep's would expose a second,
    zero, last success beside the sweep loop's."""
    with _lock:
        if name not in _made:
            kind, documentation, options = _KINDS[name]
            _made[name] = kind(name, documentation, registry=_registry, **options)
        return _made[name]


_KINDS: dict[str, tuple[type, str, dict[str, Any]]] = {
    "taskhoster_flush_seconds": (Histogram,
        "Seconds each flush of the file store took (syncfs or fsync), by program.",
        {"labelnames": ["program"], "buckets": FLUSH_BUCKETS}),
    "taskhoster_request_duration_seconds": (Histogram,
        "Seconds from a request's arrival in Django to its answer (to a stream's first byte), "
        "by URL route name, method and status class.",
        {"labelnames": ["route", "method", "status"], "buckets": REQUEST_BUCKETS}),
    "taskhoster_waiting_requests": (Gauge,
        "Requests holding a web thread now: waiting claims and reads (kind=wait), event "
        "streams (kind=stream).",
        {"labelnames": ["kind"], "multiprocess_mode": "livesum"}),
    "taskhoster_sweep_pass_seconds": (Histogram,
        "Seconds each pass of the sweep loop took (passes that ran, not those skipped).",
        {"buckets": SWEEP_BUCKETS}),
    "taskhoster_sweep_passes": (Counter,
        "Passes of the sweep loop by outcome: ok, errors (a queue or the database failed), "
        "skipped (another sweep held the lock).",
        {"labelnames": ["outcome"]}),
    "taskhoster_sweep_last_success_timestamp_seconds": (Gauge,
        "When the sweep loop last finished a pass without an error (Unix time).",
        {"multiprocess_mode": "max"}),
}  # fmt: skip


# --- what the rest of the server calls -----------------------------------------------------


# A request's and a flush's figure are kept in process memory and written to the metric at
# most once a second (buffered.py): in multiprocess mode, each observation written through
# would cost its request the labels' look-up and two writes to the mapped file under
# prometheus_client's one lock.
_flushes = buffered.BufferedHistogram(
    lambda: _metric("taskhoster_flush_seconds"), FLUSH_BUCKETS, lambda program: (program,)
)
_requests = buffered.BufferedHistogram(
    lambda: _metric("taskhoster_request_duration_seconds"),
    REQUEST_BUCKETS,
    lambda key: (key[0], key[1], f"{key[2]}xx"),
)


def write_every(seconds: float) -> None:
    """How often this process writes its request and flush figures to its files."""
    buffered.write_every(seconds)


def observe_flush(seconds: float) -> None:
    _flushes.observe(_program, seconds)


def watch_flushes() -> None:
    """Time every flush of the file store in this process (once, however often called)."""
    with _lock:
        if observe_flush not in flushing.FLUSH_OBSERVERS:
            flushing.FLUSH_OBSERVERS.append(observe_flush)


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    # the method is bounded here, not at the write: any token is a method to Django
    _requests.observe((route, method if method in METHODS else "other", status // 100), seconds)


def observe_waiting(waiting: int, streams: int) -> None:
    held = _metric("taskhoster_waiting_requests")
    held.labels("wait").set(waiting - streams)
    held.labels("stream").set(streams)


def observe_sweep(seconds: float, *, skipped: bool, errors: bool) -> None:
    passes = _metric("taskhoster_sweep_passes")
    if skipped:
        passes.labels("skipped").inc()
        return
    _metric("taskhoster_sweep_pass_seconds").observe(seconds)
    passes.labels("errors" if errors else "ok").inc()
    if not errors:
        _metric("taskhoster_sweep_last_success_timestamp_seconds").set(time.time())


def timed() -> Callable[[], float]:
    """A stopwatch: call the result for the seconds since."""
    started = time.perf_counter()
    return lambda: time.perf_counter() - started


# --- what /metrics reads -------------------------------------------------------------------


class ServerFigures(Collector):
    """Every program's multiprocess files (multiproc.root), merged family by family,
    and this process's own figures when it keeps them in memory."""

    def __init__(self, var_dir: str | os.PathLike[str]) -> None:
        self.root = multiproc.root(var_dir)

    def collect(self) -> Iterator[Metric]:
        buffered.write_all()  # this process's own figures, up to this request
        merged: dict[str, Metric] = {}
        for family in self._families():
            if family.name in merged:
                merged[family.name].samples.extend(family.samples)
            else:
                merged[family.name] = family
        yield from merged.values()

    def _families(self) -> Iterator[Metric]:
        if self.root.is_dir():
            for where in sorted(p for p in self.root.iterdir() if p.is_dir()):
                yield from MultiProcessCollector(None, path=str(where)).collect()
        if not os.environ.get(multiproc.ENV):
            yield from _registry.collect()
