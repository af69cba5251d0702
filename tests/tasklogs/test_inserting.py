"""Each database's way of storing a chunk: every row once, whatever was stored before."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from tasklogs import inserting
from tasklogs.ingest import _parse, db_time, ingest_directory
from tasklogs.models import TaskEvent

from .conftest import encode, line

pytestmark = pytest.mark.django_db
LINES = 130  # more than two full multi-row statements on SQLite, and a rest
FILE, OFFSET, DIGEST = (inserting.COLUMNS.index(name) for name in ("file", "offset", "digest"))


def chunk_rows() -> list[inserting.Row]:
    data = encode(*(line(ms=i % 1000, event="progress", status="processing") for i in range(LINES)))
    rows, report = _parse(data, "2025-01-01.jsonl", 0, db_time())
    assert (report.lines, report.bad) == (LINES, 0)
    return rows


def keys() -> list[tuple[str, int, int]]:
    return list(TaskEvent.objects.order_by("offset").values_list("file", "offset", "digest"))


@pytest.mark.parametrize("path", ["this database's", "row by row"])
def test_each_row_is_stored_once_however_often_it_comes(path: str) -> None:
    insert = (
        inserting.insert_ignoring_stored if path == "this database's" else (inserting._row_by_row)
    )
    rows = chunk_rows()
    insert(rows[40:100])
    insert(rows)  # the first 60 are stored already: only the other 70 are new
    insert(rows[:7])
    expected = sorted((r[FILE], r[OFFSET], r[DIGEST]) for r in rows)
    assert keys() == expected
    event = TaskEvent.objects.get(offset=rows[129][OFFSET])
    assert (event.event, event.status, event.file) == ("progress", "processing", "2025-01-01.jsonl")


def test_several_chunks_in_one_outer_transaction(append, day_dir: Path, monkeypatch) -> None:
    """The test's own transaction makes each chunk a savepoint: on PostgreSQL the staging table
    of one chunk must be gone before the next creates it."""
    monkeypatch.setattr("tasklogs.ingest.CHUNK_BYTES", len(encode(line())) * 3 + 1)
    append("2025-01-01", *(line(ms=i) for i in range(10)))
    report = ingest_directory(day_dir)
    assert (report.lines, report.bad) == (10, 0)
    assert TaskEvent.objects.count() == 10


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the COPY path is PostgreSQL's")
def test_postgres_copies_through_a_staging_table_left_behind_by_no_chunk() -> None:
    inserting.insert_ignoring_stored(chunk_rows())
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [inserting.STAGING])
        assert cursor.fetchone() == (None,)
    assert TaskEvent.objects.count() == LINES


def test_a_row_written_without_the_later_columns_gets_their_defaults() -> None:
    """An ingester of the release before knows nothing of by, origin, edited and lapsed: its
    rows store "" and false (the database's own defaults), not a refused NULL."""
    columns = [c for c in inserting.COLUMNS if c not in ("by", "origin", "edited", "lapsed")]
    row = dict(zip(inserting.COLUMNS, chunk_rows()[0], strict=True))
    table = connection.ops.quote_name(TaskEvent._meta.db_table)
    names = ", ".join(
        connection.ops.quote_name(TaskEvent._meta.get_field(c).column) for c in columns
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))})",
            [row[c] for c in columns],
        )
    stored = TaskEvent.objects.get()
    assert (stored.by, stored.origin, stored.edited, stored.lapsed) == ("", "", False, False)


def test_a_chunk_past_every_stored_line_is_stored_whole() -> None:
    rows = chunk_rows()
    inserting.copy_new_rows(iter(rows), file=rows[0][FILE], first_offset=rows[0][OFFSET])
    assert keys() == sorted((r[FILE], r[OFFSET], r[DIGEST]) for r in rows)


def test_a_chunk_over_stored_lines_stores_only_the_others() -> None:
    """Lines of the file at or past the chunk's start are stored: the way that skips them."""
    rows = chunk_rows()
    inserting.insert_ignoring_stored(rows[40:100])
    inserting.copy_new_rows(iter(rows), file=rows[0][FILE], first_offset=rows[0][OFFSET])
    assert keys() == sorted((r[FILE], r[OFFSET], r[DIGEST]) for r in rows)


def test_a_line_stored_unseen_by_the_probe_is_not_stored_twice() -> None:
    """What a peer of an older release does, whose lines the probe cannot see (uncommitted):
    here the stored lines lie before the offset the probe looks from, so the straight COPY is
    tried, refused by the unique key, undone, and the chunk stored the way that skips them."""
    rows = chunk_rows()
    inserting.insert_ignoring_stored(rows[100:110])
    inserting.copy_new_rows(iter(rows[100:]), file=rows[0][FILE], first_offset=rows[110][OFFSET])
    assert keys() == sorted((r[FILE], r[OFFSET], r[DIGEST]) for r in rows[100:])
    inserting.insert_ignoring_stored(rows[:100])  # the savepoint left the transaction usable
    assert len(keys()) == LINES
