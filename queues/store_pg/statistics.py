"""Planner statistics that keep up with a queue that grows faster than autovacuum looks.

Without statistics (a new table) or with old ones (a table that grew tenfold since its last
ANALYZE), PostgreSQL guesses that a queue holds a row or two, and may plan a batch's writes
as a scan of the whole queue: each batch then costs the queue's depth, and a drain of n
tasks costs n squared. Autovacuum analyzes a table a minute or more after it changed; a burst
of posts drains long before that. So each process analyzes th_tasks itself when the rows it
inserted since its last ANALYZE reach the table's size as that ANALYZE found it (at least
FIRST_ROWS): a table that doubles is analyzed once more, and a steady queue not at all.
`ANALYZE (SKIP_LOCKED)` leaves the work to whoever holds the table's analyze lock already.
"""

from __future__ import annotations

import logging
import threading

import psycopg

from queues.store.errors import StorageUnavailable

from .pool import Pool

FIRST_ROWS = 500
log = logging.getLogger(__name__)


class TableStatistics:
    def __init__(self, pool: Pool, *, first_rows: int = FIRST_ROWS) -> None:
        self._pool, self._first_rows = pool, first_rows
        self._lock = threading.Lock()
        self._inserted = 0  # by this process since its last ANALYZE
        self._rows = 0  # the table's rows as that ANALYZE found them
        self.analyzed = 0  # how many times this process analyzed (the tests look)

    def inserted(self, rows: int) -> None:
        """Count rows this process inserted (after their commit); ANALYZE when due."""
        with self._lock:
            self._inserted += rows
            if self._inserted < max(self._first_rows, self._rows):
                return
            self._inserted = 0
        try:
            self._rows = self._analyze()
            self.analyzed += 1
        except (psycopg.Error, StorageUnavailable) as exc:
            # the posts committed already; a missed ANALYZE costs speed, never a task
            log.warning("ANALYZE th_tasks failed: %s", exc)

    def _analyze(self) -> int:
        with self._pool.connection() as conn:
            conn.execute("ANALYZE (SKIP_LOCKED) th_tasks")
            found = conn.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = 'th_tasks'::regclass"
            ).fetchone()
        return max(0, int(found[0])) if found else 0
