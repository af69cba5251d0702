"""The live event stream of a PostgreSQL queue: its event rows instead of the day-files.

The same `event_stream` frames them (stream.py): `PgTail` stands for LogTail, reading the
queue's rows past the last one sent through the store's EventFollower (which hands a row out
only once no lower id can still commit, so none is skipped), and `RowsChannel` for the
day-files' inotify channel: it sleeps until the store's LISTEN thread hears a NOTIFY for the
queue, or the stream's look-again interval passes (a notification lost while the listener
reconnects). A row's position is `pg:<row id>`, what an SSE `id:` carries, so
`Last-Event-ID` resumes exactly after the last row the client saw, on any web server.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from .tail import BadPosition

_POSITION = re.compile(r"pg:(\d{1,19})", re.ASCII)
PAGE_ROWS = 500


class Follower(Protocol):
    """What the stream needs of the store's EventFollower (queues/store_pg/following.py)."""

    after: int

    @property
    def holding(self) -> bool: ...

    def read(self, limit: int = ...) -> list[tuple[int, dict[str, Any]]]: ...

    def generation(self) -> Any: ...

    def wait(self, generation: Any, seconds: float) -> None: ...


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
    """Follows one queue's event rows; `read()` returns the rows settled since, as lines."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower
        # the last read took every row there was: none left past its limit, none behind a gap
        self.at_end = False

    def read(self, limit: int = PAGE_ROWS) -> list[tuple[RowPosition, bytes]]:
        rows = self.follower.read(limit)
        self.at_end = len(rows) < limit and not self.follower.holding
        return [(RowPosition(row_id), orjson.dumps(line)) for row_id, line in rows]


class RowsChannel:
    """The stream's wake-up for rows: the store's NOTIFY, through the follower."""

    def __init__(self, follower: Follower) -> None:
        self._follower = follower
        self._closed = threading.Event()

    @property
    def generation(self) -> Any:
        return self._follower.generation()

    def wait(self, generation: Any, timeout: float) -> None:
        if not self._closed.is_set():
            self._follower.wait(generation, timeout)

    def close(self) -> None:
        self._closed.set()
