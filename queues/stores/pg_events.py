"""Reading a PostgreSQL store's event rows past a cursor, in batches, without skipping a row
that commits after a higher id did: what the failure webhooks and Task Logs' ingester share.

The cursor (an id kept in the console's database) means "every event row up to here is final
and handled". A pass takes the store's horizon (queues/store_pg/feed.py) and waits a moment for
the transactions still writing event rows to end; then the rows up to the horizon's top are
final, are handled batch by batch, and the cursor moves to each batch's end in the transaction
that records the batch. If a writer is still going after the wait (a long prune, a stalled
client), the rows visible now are handled all the same, so nothing waits on it, but the cursor
stays: the next pass reads them again, and the handlers store each row once (a unique key),
so reading twice changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from queues.store_pg import PostgresStore

SETTLE_SECONDS = 2.0  # how long a pass waits for the writers of its horizon
SETTLE_POLL_SECONDS = 0.01  # the store's transactions last milliseconds
CURSOR_PREFIX = "postgres:"


@dataclass(frozen=True)
class Reading:
    """The rows after < id <= upto are to be read; `settled`: they are final, so a cursor may
    move over them."""

    after: int
    upto: int
    settled: bool


def cursor_name(store: PostgresStore) -> str:
    """The cursor's name for this store's events table (at most 64 characters)."""
    return f"{CURSOR_PREFIX}{store.config.schema}.{store.events_table}"[:64]


def reading(store: PostgresStore, cursor: int, *, wait_seconds: float | None = None) -> Reading:
    """What a pass reads past `cursor`, having waited up to `wait_seconds` (SETTLE_SECONDS) for
    the rows up to the horizon to be final. A cursor beyond the table's highest id (a table
    made afresh, whose ids began again) is read from the start: a row handled before is
    recognised by its key."""
    seen = store.event_horizon()
    wait = SETTLE_SECONDS if wait_seconds is None else wait_seconds
    deadline = time.monotonic() + wait
    settled = store.horizon_settled(seen)
    while not settled and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_SECONDS)
        settled = store.horizon_settled(seen)
    return Reading(after=cursor if cursor <= seen.top else 0, upto=seen.top, settled=settled)


def batches(
    store: PostgresStore, read: Reading, *, size: int, events: frozenset[str] | None = None
) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """(rows, end) for each batch of `read`, oldest first: every row of the range up to `end`
    that is visible now is in this batch or an earlier one."""
    after = read.after
    while after < read.upto:
        rows = store.event_rows(after=after, upto=read.upto, limit=size, events=events)
        end = int(rows[-1]["id"]) if len(rows) == size else read.upto
        yield rows, end
        after = end
