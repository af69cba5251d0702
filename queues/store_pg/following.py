"""Following one queue's event rows: what the live event stream of a PostgreSQL queue reads.

Event row ids come from the events table's sequence, and a transaction takes its ids before
it commits: one that took id 10 may commit after another took and committed id 11. A reader
that handed out 11 and then asked for `id > 11` would skip 10 forever, and so would a client
resuming with `Last-Event-ID: pg:11`. So a follower hands out a row only once every lower id
is settled: its row is there, or it is taken to be never coming.

- Every read asks, in one statement (one snapshot), for the queue's rows past its position
  and for how far the table's ids run from the settled point without a gap, whatever their
  queue. Rows below the first gap are handed out at once: the usual case, however busy the
  server, since a gap only exists while a writer of the table is between taking its id and
  committing (a store verb sends its writes and its COMMIT in one batch: milliseconds).
- A gap that fills hands out the rows behind it, in id order. The gap's writer NOTIFYs when it
  commits, so a follower holding rows back wakes on any queue's notification.
- A gap that stays open `settle_seconds` (5) is taken as never coming: a transaction that
  rolled back after taking its id (rare: the store decides and refuses before it writes). The
  rows behind it waited that long.

So every row is handed out once, in id order, and the last id handed out is a position to
resume from exactly. What this does not cover: a writer whose COMMIT lands more than
`settle_seconds` after a later id was committed (a server stalled that long mid-commit):
its row is skipped. A transaction id horizon (pg_snapshot_xmin) would not need the time
bound, but it waits for every transaction of the server, in any database, so one session
left idle in a transaction would stop every stream; and a snapshot's xmax does not cover the
transactions that began after the last one ended, so it cannot tell a gap's writer has ended.
"""

from __future__ import annotations

import time
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from . import rows
from .pool import Pool
from .waits import ANY_QUEUE, Waits

SETTLE_SECONDS = 5.0
# While rows are held back, the follower looks again this soon (doubling up to HOLD_LOOK_MOST):
# the writer of the gap usually commits within milliseconds, and its NOTIFY may not come (a
# writer of Task Logs' table that is not the store's, or a notification lost).
HOLD_LOOK_FIRST = 0.02
HOLD_LOOK_MOST = 1.0
# Ids one look checks for gaps at most (an index-only range of the primary key), and looks a
# read takes at most to catch up with other queues' rows after a long quiet spell of its own.
GAP_CHECK_IDS = 10_000
CATCH_UP_READS = 20

# One statement, one snapshot: the queue's rows past the position, and how far the table's
# ids run unbroken from `known` up to the last of those rows (`th_through`: the first id that
# is not `known` plus its rank, less one; `known` plus their count when none breaks the run).
_READ = """
WITH mine AS (
    SELECT * FROM {events} WHERE host = %(host)s AND queue = %(queue)s AND id > %(after)s
    ORDER BY id LIMIT %(limit)s
)
SELECT
    (SELECT %(known)s + coalesce(min(c.n) FILTER (WHERE c.id <> %(known)s + c.n) - 1, count(*))
     FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM {events}
           WHERE id > %(known)s AND id <= (SELECT max(id) FROM mine)
           ORDER BY id LIMIT %(ids)s) AS c) AS th_through,
    mine.*
FROM (SELECT 1) AS one LEFT JOIN mine ON true
ORDER BY mine.id
"""

Generation = tuple[int, int]  # (the queue's notifications, every queue's)


class EventFollower:
    """One subscriber's position in a queue's event rows: `read()` hands out the rows settled
    since, oldest first; `generation()` and `wait()` sleep until a NOTIFY says there may be
    more, or the store's poll_seconds pass (the look-again when a notification is lost)."""

    def __init__(
        self,
        pool: Pool,
        waits: Waits,
        events: sql.Identifier,
        host: str,
        queue: str,
        *,
        after_id: int,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        self._pool, self._waits, self.host, self.queue = pool, waits, host, queue
        self._read = sql.SQL(_READ).format(events=events)
        self.settle_seconds = settle_seconds
        self.gap_check_ids = GAP_CHECK_IDS
        self.after = after_id  # every row of the queue up to here is handed out, or never will be
        self._settled = after_id  # every id of the table up to here is there, or never will be
        # (row id, when first held): the highest row seen behind a gap, and since when
        self._held: tuple[int, float] | None = None
        self._look = HOLD_LOOK_FIRST

    @property
    def holding(self) -> bool:
        """Whether rows were seen that wait behind a gap."""
        return self._held is not None

    def read(self, limit: int = 100) -> list[tuple[int, dict[str, Any]]]:
        """The settled rows past the position, oldest first, at most `limit` (each as its id
        and the file store's event line); the position moves past them."""
        for _ in range(CATCH_UP_READS):
            through, seen = self._look_past(limit)
            caught_up = through < self._settled + self.gap_check_ids
            self._settled = max(self._settled, through)
            if caught_up or not seen or int(seen[-1]["id"]) <= self._settled:
                break  # else the gap check stopped at its cap: not a gap, read on
        if self._held is not None and time.monotonic() - self._held[1] >= self.settle_seconds:
            self._settled = max(self._settled, self._held[0])  # the gaps below: never coming
        handed = [(int(r["id"]), rows.line_of(r)) for r in seen if r["id"] <= self._settled]
        if handed:
            self.after = handed[-1][0]
        if not seen or int(seen[-1]["id"]) <= self.after:
            self._held, self._look = None, HOLD_LOOK_FIRST
        elif self._held is None or self._held[0] <= self.after:
            self._held = (int(seen[-1]["id"]), time.monotonic())
        return handed

    def _look_past(self, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """From one snapshot: how far the table's ids run unbroken past the settled point,
        and the queue's rows past the position."""
        with self._pool.connection() as conn:
            found = conn.cursor(row_factory=dict_row).execute(
                self._read,
                {"host": self.host, "queue": self.queue, "after": self.after,
                 "limit": max(limit, 1), "known": self._settled, "ids": self.gap_check_ids},
            )  # fmt: skip
            table = found.fetchall()
        return int(table[0]["th_through"]), [row for row in table if row["id"] is not None]

    def generation(self) -> Generation:
        """Read before `read()`, passed to `wait()`: no notification in between is slept through."""
        return (self._waits.generation((self.host, self.queue)), self._waits.generation(ANY_QUEUE))

    def wait(self, generation: Generation, seconds: float) -> None:
        """Until a notification for the queue (any queue's, while rows are held back: the
        gap's writer may be another queue's) came after `generation`, or `seconds`, capped
        at poll_seconds (and at a short, growing look while rows are held)."""
        if self.holding:
            look, self._look = self._look, min(self._look * 2, HOLD_LOOK_MOST)
            self._waits.wait(ANY_QUEUE, generation[1], min(seconds, look))
        else:
            self._waits.wait((self.host, self.queue), generation[0], seconds)
