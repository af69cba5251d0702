"""What `ingest_tasklogs` says, in words: one line for a run, and under --follow a summary at
most every few minutes of what the passes since stored ("549 events stored since 19:52 UTC").
A pass that found nothing says nothing."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from .ingest import IngestReport

SUMMARY_SECONDS = 300.0  # a busy follower speaks at most this often


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else many or word + 's'}"


def run_line(report: IngestReport, seconds: float) -> str | None:
    """One run's line in words ("549 events stored from 2 day-files in 0.4 s"), or None when
    it read nothing."""
    if not (report.lines or report.bad or report.store_rows):
        return None
    from_files = report.lines - report.bad
    day_files = f"from {plural(report.files, 'day-file')}"
    store = "from the PostgreSQL store"
    if not report.store_rows:
        stored = f"{plural(from_files, 'event')} stored {day_files}"
    elif not report.files:
        stored = f"{plural(report.store_rows, 'event')} stored {store}"
    else:
        stored = (
            f"{plural(from_files + report.store_rows, 'event')} stored, {from_files} {day_files} "
            f"and {report.store_rows} {store},"
        )
    return f"{stored} in {seconds:.1f} s{_skipped(report.bad)}"


def _skipped(bad: int) -> str:
    """The bad lines a run left out, each named on stderr; nothing when there were none."""
    return f"; {plural(bad, 'bad line')} skipped" if bad else ""


class FollowSummary:
    """Counts what the passes of a follower ingested and says it at most every `every` seconds:
    at once when the last summary is older than that, else when it is. Nothing when idle."""

    def __init__(
        self, *, every: float = SUMMARY_SECONDS, clock: Callable[[], float] = time.time
    ) -> None:
        self.every, self.clock = every, clock
        self.last_said: float | None = None
        self._reset()

    def _reset(self) -> None:
        self.lines = self.bad = 0
        self.since: float | None = None  # when the first pass not yet summed up ended

    def said(self) -> None:
        """Something was just printed (the first run's line): the next summary waits."""
        self.last_said = self.clock()

    def add(self, *, lines: int, bad: int) -> None:
        if lines or bad:
            self.lines, self.bad = self.lines + lines, self.bad + bad
            if self.since is None:
                self.since = self.clock()

    def due_in(self) -> float:
        """Seconds until the pending summary is due (0: now); `every` when nothing is pending."""
        if self.since is None:
            return self.every
        if self.last_said is None:
            return 0.0
        return max(self.last_said + self.every - self.clock(), 0.0)

    def take_if_due(self) -> str | None:
        return self.take() if self.since is not None and self.due_in() == 0 else None

    def take(self) -> str | None:
        """The pending summary, now (e.g. on stopping), or None when there is nothing to say."""
        if self.since is None:
            return None
        since = dt.datetime.fromtimestamp(self.since, dt.UTC)
        stored = self.lines - self.bad
        text = f"{plural(stored, 'event')} stored since {since:%H:%M} UTC{_skipped(self.bad)}"
        self._reset()
        self.said()
        return text
