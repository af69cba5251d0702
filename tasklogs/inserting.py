"""Storing a chunk of event rows, each line once: the fastest way each database offers.

Every path has the semantics of `INSERT ... ON CONFLICT DO NOTHING` on the unique key
(file, offset, digest), so two ingesters reading the same lines store them once. The caller
holds the chunk's transaction; each function here runs inside it.

- PostgreSQL: the rows are copied (COPY, one stream) into a temporary table dropped at commit,
  then moved by one `INSERT ... SELECT ... ON CONFLICT DO NOTHING`. Per-row statements, even
  pipelined, left the server parsing and planning 15,000 inserts a chunk (7,000 lines/s).
- SQLite: multi-row `INSERT OR IGNORE` statements, as many rows each as the backend allows
  parameters: one statement step per row costs more than the row itself.
- Anything else: one prepared statement run for every row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain

from django.db import connection
from django.db.models.constants import OnConflict

from .models import TaskEvent

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

    meta = TaskEvent._meta
    table = sql.Identifier(meta.db_table)
    staging = sql.Identifier(STAGING)
    columns = sql.SQL(", ").join(sql.Identifier(meta.get_field(n).column) for n in COLUMNS)
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
        # The chunk's commit need not wait for its WAL flush: a commit lost to a crash loses
        # its rows and its cursor's advance together, and the next run reads them again.
        cursor.execute("SET LOCAL synchronous_commit = off")
