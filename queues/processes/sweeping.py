"""What `manage.py sweep --loop` says: a line when a pass changed something, a summary every
few minutes, and nothing at all for a pass that found nothing to do.

A loop that printed every pass (every 5 s) buried the one line that mattered; a supervisor's
log keeps these lines, so each says when, and what changed, in counts.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field

from queues.models import Queue
from queues.store import SweepReport

SUMMARY_SECONDS = 300.0  # a summary line at most this often: the loop is alive, and its totals


def configured_queues() -> int:
    """The queues the sweep covers: every configured one, including those no task has reached
    yet (they have no directory on disk, and nothing to sweep)."""
    return Queue.objects.count()


def changes(report: SweepReport) -> dict[str, int]:
    """The counts of what a pass did, without the count of queues it looked at."""
    return {name: n for name, n in report.counts().items() if n and name != "queues"}


def stamp(now: float) -> str:
    return dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe(counts: dict[str, int]) -> str:
    return " ".join(f"{name}={n}" for name, n in counts.items()) or "nothing changed"


def plural(n: int, word: str, words: str = "") -> str:
    return f"{n} {word if n == 1 else words or word + 's'}"


@dataclass
class SweepTally:
    """Decides which lines a loop of sweeps prints; `now` is seconds since the epoch."""

    started: float
    summary_seconds: float = SUMMARY_SECONDS
    passes: int = 0
    totals: Counter[str] = field(default_factory=Counter)
    last_summary: float = 0.0
    skipping: bool = False
    last_errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.last_summary = self.started

    def lines(self, report: SweepReport, queues: int, now: float) -> tuple[list[str], list[str]]:
        """(lines for stdout, lines for stderr) after one pass."""
        out: list[str] = []
        if report.skipped != self.skipping:  # said when it starts and when it ends
            self.skipping = report.skipped
            out.append(
                f"{stamp(now)} skipped: another sweep is running"
                if report.skipped
                else f"{stamp(now)} sweeping again: the other sweep is done"
            )
        if not report.skipped:
            self.passes += 1
            done = changes(report)
            self.totals.update(done)
            if done:
                out.append(f"{stamp(now)} {plural(queues, 'queue')} swept: {describe(done)}")
        errors = [] if report.errors == self.last_errors else list(report.errors)
        self.last_errors = list(report.errors)
        if now - self.last_summary >= self.summary_seconds:
            out.append(self.summary(queues, now))
        return out, errors

    def summary(self, queues: int, now: float) -> str:
        minutes = round((now - self.last_summary) / 60)
        line = (
            f"{stamp(now)} last {minutes} min: {plural(self.passes, 'pass', 'passes')} over "
            f"{plural(queues, 'queue')}: {describe(dict(self.totals))}"
        )
        if self.last_errors:
            line += f"; {plural(len(self.last_errors), 'error')} in the last pass"
        self.passes, self.totals, self.last_summary = 0, Counter(), now
        return line
