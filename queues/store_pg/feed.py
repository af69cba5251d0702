"""Reading the events table in id order without ever skipping a row that commits late.

An event row's id is drawn from a sequence when the row is inserted, and transactions commit in
any order: a reader may see row 11 while row 10's transaction is still open. A cursor that
moved to "the highest id seen" would then pass over row 10 for good. So a reader first takes a
horizon: the highest id committed now (`top`), then the transactions holding a write lock on
the events table. An INSERT takes that lock (RowExclusiveLock) before it draws its first id and
keeps it until its transaction ends, and ids are drawn in increasing order (the sequences have
no cache), so every transaction that drew an id up to `top` and has not ended yet is among
those writers. Once all of them have ended (`settled`), the rows with ids up to `top` are final:
none can appear later. Only then may a cursor move to `top`.

Unrelated long transactions (another database's, an idle psql session) do not hold the horizon
back; only a transaction that writes event rows does, and the store's are short. Waiting for
the writers is the caller's (queues/stores/pg_events.py): the store does not sleep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from . import rows
from .writes import Conn

# the transactions writing into one table of this database (a prepared one has no pid)
_WRITERS = """
SELECT DISTINCT virtualtransaction FROM pg_locks
WHERE locktype = 'relation' AND mode = 'RowExclusiveLock'
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND relation = to_regclass(%(table)s) AND pid IS DISTINCT FROM pg_backend_pid()
"""
_STILL_WRITING = sql.SQL("SELECT EXISTS ({} AND virtualtransaction = ANY(%(writers)s))").format(
    sql.SQL(_WRITERS)
)


@dataclass(frozen=True)
class Horizon:
    """`top`: the highest event id committed when it was taken; `writers`: the transactions
    that were writing event rows then (their virtual transaction ids)."""

    top: int
    writers: tuple[str, ...]


def horizon(conn: Conn, table: str) -> Horizon:
    # In this order: `top` first, so that whoever drew an id up to it already holds the lock
    # when the writers are listed (or has ended: committed, so readable, or rolled back).
    found = conn.execute(
        sql.SQL("SELECT coalesce(max(id), 0) FROM {}").format(sql.Identifier(table))
    ).fetchone()
    top = int(found[0]) if found else 0
    writers = conn.execute(_WRITERS, {"table": table}).fetchall()
    return Horizon(top=top, writers=tuple(str(w[0]) for w in writers))


def settled(conn: Conn, table: str, seen: Horizon) -> bool:
    """Whether every writer of the horizon has ended: no row up to its `top` can appear now."""
    if not seen.writers:
        return True
    found = conn.execute(_STILL_WRITING, {"table": table, "writers": list(seen.writers)})
    row = found.fetchone()
    return not (row and row[0])


def event_rows(
    conn: Conn,
    table: str,
    *,
    after: int,
    upto: int,
    limit: int,
    events: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    """The store's event rows with after < id <= upto, in id order, at most `limit` (only
    those of the `events` named, when given); each a dict of the table's columns."""
    where: sql.Composable = sql.SQL("id > %(after)s AND id <= %(upto)s AND file = %(file)s")
    if events is not None:
        where = sql.SQL("{} AND event = ANY(%(events)s)").format(where)
    query = sql.SQL("SELECT * FROM {} WHERE {} ORDER BY id LIMIT %(limit)s").format(
        sql.Identifier(table), where
    )
    params = {"after": after, "upto": upto, "file": rows.EVENT_FILE, "limit": limit,
              "events": sorted(events or ())}  # fmt: skip
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, params).fetchall()
