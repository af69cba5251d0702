"""The live event stream of a PostgreSQL queue: its event rows instead of the day-files.

The same `event_stream` frames them (stream.py): `PgTail` stands for LogTail, reading the
queue's rows past the last one sent (the store's `events_since`), and `PollChannel` for the
day-files' inotify channel. A row's position is `pg:<row id>`, what an SSE `id:` carries, so
`Last-Event-ID` resumes exactly after the last row the client saw, on any web server.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from .tail import BadPosition

_POSITION = re.compile(r"pg:(\d{1,19})", re.ASCII)
PAGE_ROWS = 500

# (host, queue, after_id, limit) -> [(row id, event line)], oldest first
EventsSince = Callable[[str, str, int, int], list[tuple[int, dict[str, Any]]]]


@dataclass(frozen=True)
class RowPosition:
    row_id: int

    def __str__(self) -> str:
        return f"pg:{self.row_id}"

    @classmethod
    def parse(cls, text: str) -> RowPosition:
        match = _POSITION.fullmatch(text.strip())
        if match is None:
            raise BadPosition(text)
        return cls(int(match.group(1)))


class PgTail:
    """Follows one queue's event rows; `read()` returns the rows added since, as lines."""

    def __init__(
        self, events_since: EventsSince, host: str, queue: str, start: RowPosition | None
    ) -> None:
        self._events_since, self.host, self.queue = events_since, host, queue
        # a new subscriber sees what happens from now on: skip to the last row there is
        self.after = start.row_id if start is not None else self._last_row_id()

    def read(self, limit: int = PAGE_ROWS) -> list[tuple[RowPosition, bytes]]:
        rows = self._events_since(self.host, self.queue, self.after, limit)
        if rows:
            self.after = rows[-1][0]
        return [(RowPosition(row_id), orjson.dumps(line)) for row_id, line in rows]

    def _last_row_id(self) -> int:
        after = 0
        while rows := self._events_since(self.host, self.queue, after, 10 * PAGE_ROWS):
            after = rows[-1][0]
        return after


class PollChannel:
    """The stream's wake-up for rows: it looks again after each wait (at most a second, the
    stream's liveness interval), as the store's own waits do when a NOTIFY is lost."""

    def __init__(self) -> None:
        self.generation = 0
        self._closed = threading.Event()

    def wait(self, generation: int, timeout: float) -> None:
        self._closed.wait(timeout)

    def close(self) -> None:
        self._closed.set()
