"""Reading the event log from a position, across day-files, one complete line at a time.

A position is `YYYY-MM-DD:offset`: the day-file and the byte just after a line. It is what an
SSE `id:` carries, so `Last-Event-ID` resumes exactly after the last line the client saw.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from queues.store import paths
from queues.store.eventlog import whole_line

from .lines import read_complete_lines

_POSITION = re.compile(r"(\d{4}-\d{2}-\d{2}):(\d{1,15})", re.ASCII)
# Lines go to the day-file of their own timestamp, so a transition stamped 23:59:59.9 may be
# appended after the first line of the next day has been: yesterday stays followed all day.
FOLLOW_DAYS_BACK = 1


class BadPosition(ValueError):
    """Not a position this server handed out (`YYYY-MM-DD:offset`)."""


@dataclass(frozen=True)
class Position:
    day: dt.date
    offset: int

    def __str__(self) -> str:
        return f"{self.day.isoformat()}:{self.offset}"

    @classmethod
    def parse(cls, text: str) -> Position:
        match = _POSITION.fullmatch(text.strip())
        if match is None:
            raise BadPosition(text)
        try:
            return cls(dt.date.fromisoformat(match.group(1)), int(match.group(2)))
        except ValueError as exc:
            raise BadPosition(text) from exc


def utc_today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


class LogTail:
    """Follows `<logs>/tasks/*.jsonl` for one reader; `read()` returns what was appended since.

    Only complete lines are returned: a line another process is still writing stays for the
    next read. The reader keeps no descriptor open between reads, so a pruned day-file is
    simply gone and a reader costs nothing while idle.
    """

    def __init__(
        self,
        logs_dir: Path,
        start: Position | None = None,
        *,
        today: Callable[[], dt.date] = utc_today,
    ) -> None:
        self.tasks_dir = logs_dir / "tasks"
        self.today = today
        if start is None:  # a new subscriber sees what happens from now on
            day = today()
            start = Position(day, _size(paths.day_file(logs_dir, day)))
        self.offsets: dict[dt.date, int] = {start.day: start.offset}
        self.first_day = start.day  # days before the start are never read
        # the last read took every complete line there was (it did not stop at its limit)
        self.at_end = False

    def read(self, limit: int = 1 << 20) -> list[tuple[Position, bytes]]:
        """Lines appended since the last read, oldest day first, about `limit` bytes at most."""
        self._follow_new_days()
        found: list[tuple[Position, bytes]] = []
        budget = limit
        for day in sorted(self.offsets):
            if budget <= 0:
                break
            chunk = self._read_day(day, budget)
            budget -= sum(len(line) + 1 for _, line in chunk)
            found.extend(chunk)
        self._forget_old_days()
        self.at_end = budget > 0
        return found

    def _follow_new_days(self) -> None:
        """Follow every day-file from the first unfinished day to today (rollover included)."""
        day, today = self.first_day, self.today()
        while day <= today:
            self.offsets.setdefault(day, 0)
            day += dt.timedelta(days=1)

    def _read_day(self, day: dt.date, limit: int) -> list[tuple[Position, bytes]]:
        offset = self.offsets[day]
        try:
            fd = os.open(self.tasks_dir / f"{day.isoformat()}.jsonl", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return []  # not written yet, or pruned
        try:
            while (read := read_complete_lines(fd, offset, limit)).cut:
                limit *= 2  # one line longer than the budget: take it whole
        finally:
            os.close(fd)
        lines: list[tuple[Position, bytes]] = []
        after = offset
        for text in read.lines.split(b"\n")[:-1]:  # the lines end in a newline: drop the ""
            after += len(text) + 1
            if text := whole_line(text):  # a line glued to a torn write's fragment: its own part
                lines.append((Position(day, after), text))
        self.offsets[day] = offset + len(read.lines)
        return lines

    def _forget_old_days(self) -> None:
        """Stop following day-files that can no longer grow (before yesterday) once read."""
        oldest_live = self.today() - dt.timedelta(days=FOLLOW_DAYS_BACK)
        while self.first_day < oldest_live:
            day = self.first_day
            path = self.tasks_dir / f"{day.isoformat()}.jsonl"
            if _size(path) > self.offsets.get(day, 0):
                break  # more to read than the last read's budget allowed
            self.offsets.pop(day, None)
            self.first_day = day + dt.timedelta(days=1)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
