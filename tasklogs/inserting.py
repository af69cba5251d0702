"""Storing a chunk of event rows, each line once: the fastest way each database offers.

Every path has the semantics of `INSERT ... ON CONFLICT DO NOTHING` on the unique key
(file, offset, digest), so two ingesters reading the same lines store them once. The caller
holds the chunk's transaction; each function here runs inside it.

- PostgreSQL, when no line of the chunk's day-file at or past its first offset is stored (the
  common case: a chunk read past the cursor by the only ingester): the rows are copied straight
  into the table as they are parsed (`copy_new_rows`), so the server maintains the indexes while
  the client parses the rest. Should a line be stored after all (a peer of an older release that
  does not lock the cursor), the unique key refuses the COPY, which is undone to its savepoint
  and the chunk goes the other way:
- PostgreSQL otherwise: the rows are copied (COPY, one stream) into a temporary table dropped at
  commit, then moved by one `INSERT ... SELECT ... ON CONFLICT DO NOTHING`. Per-row statements,
  even pipelined, left the server parsing and planning 15,000 inserts a chunk (7,000 lines/s);
  the staging table and the conflict check cost a quarter to a third more server CPU than the COPY
  straight into the table.
- SQLite: multi-row `INSERT OR IGNORE` statements, as many rows each as the backend allows
  parameters: one statement step per row costs more than the row itself.
- Anything else: one prepared statement run for every row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING

from django.db import connection, transaction
from django.db.models.constants import OnConflict

from .models import TaskEvent

if TYPE_CHECKING:
    from psycopg import sql

COLUMNS = (
    "t",
    "at",
    "host",
    "queue",
    "task_id",
    "event",
    "status",
    "attempts",
    "worker",
    "bytes_item",
    "bytes_progress",
    "bytes_result",
    "bytes_error",
    "archived",
    "by",
    "origin",
    "edited",
    "lapsed",
    "reason",
    "file",
    "offset",
    "digest",
)
STAGING = "tasklogs_ingest_chunk"  # the temporary table of the PostgreSQL path

Row = tuple[object, ...]  # one TaskEvent, in COLUMNS' order


def insert_ignoring_stored(rows: Sequence[Row]) -> None:
    """Store `rows`, skipping any whose (file, offset, digest) is stored already."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        _copy_then_insert(rows)
    elif connection.vendor == "sqlite":
        _multi_row_inserts(rows)
    else:
        _row_by_row(rows)


def copy_new_rows(rows: Iterable[Row], *, file: str, first_offset: int) -> None:
    """Store the rows of one chunk of `file` starting at `first_offset`, as `rows` yields them
    (an iterator is consumed once, while the server stores what it has been sent).

    Same semantics as `insert_ignoring_stored`; the caller holds the chunk's transaction and,
    for the fast path to be taken, the lock of the day-file's cursor."""
    if connection.vendor != "postgresql":
        insert_ignoring_stored(list(rows))
        return
    pending = iter(rows)
    if _stored_from(file, first_offset):
        _copy_then_insert(list(pending))
        return
    sent: list[Row] = []
    try:
        with transaction.atomic():  # a savepoint: a refused COPY leaves the chunk's work intact
            _copy_straight(pending, sent)
    except _unique_violation():
        # A line was stored by a peer after all: the COPY is undone; store every row of the
        # chunk, those sent and those not yet parsed, the way that skips stored lines.
        sent.extend(pending)
        _copy_then_insert(sent)


def _unique_violation() -> type[Exception]:
    from psycopg.errors import UniqueViolation

    return UniqueViolation


def _stored_from(file: str, offset: int) -> bool:
    """Whether any line of `file` at or past `offset` is stored: one probe of the unique key's
    index (file, offset, digest)."""
    return TaskEvent.objects.filter(file=file, offset__gte=offset).exists()


def _copy_straight(rows: Iterator[Row], sent: list[Row]) -> None:
    from psycopg import sql

    table, columns = _identifiers()
    copy_in = sql.SQL("COPY {table} ({columns}) FROM STDIN").format(table=table, columns=columns)
    with connection.cursor() as wrapper:
        cursor = wrapper.cursor  # the raw psycopg cursor: Django's wrapper does not offer COPY
        with cursor.copy(copy_in) as copy:
            for row in rows:
                sent.append(row)
                copy.write_row(row)
        _no_flush_wait(cursor)


def _identifiers() -> tuple[sql.Identifier, sql.Composed]:
    """The table's and the columns' identifiers (COLUMNS' order), quoted by psycopg."""
    from psycopg import sql

    meta = TaskEvent._meta
    columns = sql.SQL(", ").join(sql.Identifier(meta.get_field(n).column) for n in COLUMNS)
    return sql.Identifier(meta.db_table), columns


def _no_flush_wait(cursor: object) -> None:
    # The chunk's commit need not wait for its WAL flush: a commit lost to a crash loses
    # its rows and its cursor's advance together, and the next run reads them again.
    cursor.execute("SET LOCAL synchronous_commit = off")  # type: ignore[attr-defined]


def _names() -> tuple[str, str]:
    """The table's quoted name and its quoted column list, in COLUMNS' order."""
    meta, ops = TaskEvent._meta, connection.ops
    columns = ", ".join(ops.quote_name(meta.get_field(name).column) for name in COLUMNS)
    return ops.quote_name(meta.db_table), columns


def _insert_sql(rows_per_statement: int) -> str:
    """Django's own spelling of an ignoring insert: `INSERT OR IGNORE` on SQLite, `ON CONFLICT
    DO NOTHING` elsewhere."""
    ops = connection.ops
    table, columns = _names()
    fields = [TaskEvent._meta.get_field(name) for name in COLUMNS]
    one = "(" + ", ".join(["%s"] * len(COLUMNS)) + ")"
    return (
        f"{ops.insert_statement(on_conflict=OnConflict.IGNORE)} {table} ({columns}) "
        f"VALUES {', '.join([one] * rows_per_statement)} "
        f"{ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None)}"
    )


def _row_by_row(rows: Sequence[Row]) -> None:
    with connection.cursor() as cursor:
        cursor.executemany(_insert_sql(1), rows)


def _multi_row_inserts(rows: Sequence[Row]) -> None:
    per = max(connection.features.max_query_params // len(COLUMNS), 1)
    whole = len(rows) - len(rows) % per
    with connection.cursor() as cursor:
        if whole:
            cursor.executemany(_insert_sql(per), _flattened(rows[:whole], per))
        if whole < len(rows):
            cursor.executemany(_insert_sql(1), rows[whole:])


def _flattened(rows: Sequence[Row], per: int) -> Iterator[list[object]]:
    """The parameters of each `per`-row statement, one flat list each."""
    for start in range(0, len(rows), per):
        yield list(chain.from_iterable(rows[start : start + per]))


def _copy_then_insert(rows: Sequence[Row]) -> None:
    # psycopg composes the statements: every name is quoted by the driver as an identifier,
    # and the values travel in COPY's stream, never in the SQL text.
    from psycopg import sql

    table, columns = _identifiers()
    staging = sql.Identifier(STAGING)
    names = {"table": table, "staging": staging, "columns": columns}
    create = sql.SQL(
        "CREATE TEMPORARY TABLE {staging} ON COMMIT DROP AS "
        "SELECT {columns} FROM {table} WITH NO DATA"
    ).format(**names)
    copy_in = sql.SQL("COPY {staging} ({columns}) FROM STDIN").format(**names)
    move = sql.SQL(
        "INSERT INTO {table} ({columns}) SELECT {columns} FROM {staging} ON CONFLICT DO NOTHING"
    ).format(**names)
    drop = sql.SQL("DROP TABLE {staging}").format(**names)
    with connection.cursor() as wrapper:
        # The raw psycopg cursor: Django's wrapper neither offers COPY nor takes composed SQL.
        cursor = wrapper.cursor
        # Dropped with the chunk's transaction, so nothing is left behind by an error either.
        cursor.execute(create)
        with cursor.copy(copy_in) as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(move)
        # Dropped now as well: inside an outer transaction (a caller's atomic block) the chunk
        # is a savepoint, whose release is no commit, and the next chunk creates it again.
        cursor.execute(drop)
        _no_flush_wait(cursor)
