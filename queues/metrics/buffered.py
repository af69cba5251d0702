"""Histogram observations kept in process memory, written to their prometheus_client metric by a
background thread about once a second, at exit, and before this process's own scrape.

In multiprocess mode every observation of a prometheus_client histogram writes its bucket and
its sum to the memory-mapped file under a process-wide lock, and finds its labelled child first;
a request paid that on its own thread. Here a request adds to two floats of a row of plain
numbers under a lock of its own, and the writer copies the rows' totals into the metric (`set`,
not `inc`: a write that failed is simply made again by the next). So /metrics shows another
process's figures at most about a second late, and a process killed without its exit (SIGKILL)
loses at most its last second of them (TASKHOSTER_METRICS_WRITE_SECONDS; docs/metrics.md).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from typing import Any

logger = logging.getLogger(__name__)

# How often the writer writes (settings.TASKHOSTER_METRICS_WRITE_SECONDS, given by the process
# that counts): how late another process's figures may be in a scrape, and what a SIGKILL may
# take with it.
_every = [1.0]


def write_every(seconds: float) -> None:
    """The seconds between two writes of the writers started from now on."""
    _every[0] = seconds


class BufferedHistogram:
    """A labelled histogram's observations in this process, written to `metric()`'s children.

    `metric` makes (or returns) the prometheus_client Histogram: it is made on the first
    write, not at import, since prometheus_client picks memory or files when a metric is made.
    `labels` turns a row's key into the metric's label values (done at write time, once per
    row, not per observation).
    """

    def __init__(
        self,
        metric: Callable[[], Any],
        bounds: Sequence[float],
        labels: Callable[[Any], Sequence[str]],
    ) -> None:
        self._metric = metric
        self._bounds = tuple(float(b) for b in bounds)  # +Inf is the row's last bucket
        self._labels = labels
        self._lock = threading.Lock()
        # key -> [count of each bucket..., count above the last bound, sum]: totals since this
        # process began (or forked), never reset, so that a write sets, and may be made again
        self._rows: dict[Hashable, list[float]] = {}
        self._changed = False
        _WRITER.add(self)

    def observe(self, key: Hashable, value: float) -> None:
        """Count `value` under `key`: the only work a request does for its figure."""
        index = bisect_left(self._bounds, value)  # the first bound >= value: Prometheus' `le`
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                row = self._rows[key] = [0.0] * (len(self._bounds) + 2)
                _WRITER.ensure_running()  # a new process (a forked worker) starts its writer
            row[index] += 1
            row[-1] += value
            self._changed = True

    def write(self) -> None:
        """Set the metric's children to this process's totals, if anything changed since."""
        with self._lock:
            if not self._changed:
                return
            rows = {key: list(row) for key, row in self._rows.items()}
            self._changed = False
        try:
            metric = self._metric()
            for key, row in rows.items():
                _set_totals(metric.labels(*self._labels(key)), row)
        except BaseException:
            with self._lock:
                self._changed = True  # the next write tries again
            raise

    def forget(self) -> None:
        """After a fork: the parent's totals are in the parent's files, not this process's."""
        self._lock = threading.Lock()  # a lock held by a thread of the parent stays held
        self._rows, self._changed = {}, False


def _set_totals(child: Any, row: list[float]) -> None:
    """prometheus_client's Histogram keeps one value per bucket (not cumulative: its collector
    adds them up) and one for the sum; its `observe` adds to them, which is all it offers, so
    the totals are set on those values themselves (`_buckets`, `_sum`, in every release since
    multiprocess mode came; tests/test_metrics_buffered.py reads them back through the
    exposition, so a release that renamed them fails there)."""
    buckets = child._buckets
    if len(buckets) != len(row) - 1:
        raise RuntimeError("the histogram's buckets are not the buffered ones")
    for value, count in zip(buckets, row[:-1], strict=True):
        value.set(count)
    child._sum.set(row[-1])


class _Writer:
    """The background thread of this process that writes every buffered histogram."""

    def __init__(self) -> None:
        self._histograms: list[BufferedHistogram] = []
        self._lock = threading.Lock()
        # one write at a time: two that overlapped could set an older copy of the totals
        # after a newer one, and a counter would go back until the next observation
        self._writing = threading.Lock()
        self._pid = 0  # the process whose thread runs: after a fork, none runs in the child
        self._failing = False
        atexit.register(self.write_all)
        os.register_at_fork(after_in_child=self._forked)

    def add(self, histogram: BufferedHistogram) -> None:
        with self._lock:
            self._histograms.append(histogram)

    def ensure_running(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
        thread = threading.Thread(target=self._run, args=(_every[0],), daemon=True,
                                  name="taskhoster-metrics")  # fmt: skip
        thread.start()

    def write_all(self) -> None:
        """Write every buffered histogram now; a failure is logged once until one succeeds."""
        with self._lock:
            histograms = list(self._histograms)
        with self._writing:
            failed = False
            for histogram in histograms:
                try:
                    histogram.write()
                except Exception:
                    # its figures stay in memory and the next write tries again; the server
                    # goes on, and says so once, not at every write
                    if not self._failing:
                        logger.exception("could not write the server's figures; trying again")
                    failed = self._failing = True
            self._failing = failed

    def _run(self, seconds: float) -> None:
        while True:
            time.sleep(seconds)
            self.write_all()

    def _forked(self) -> None:
        self._lock, self._writing = threading.Lock(), threading.Lock()
        self._pid, self._failing = 0, False
        for histogram in self._histograms:
            histogram.forget()


_WRITER = _Writer()


def write_all() -> None:
    """Write this process's buffered observations now (before its own scrape reads them)."""
    _WRITER.write_all()
