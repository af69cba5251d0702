"""Each database's way of storing a chunk: every row once, whatever was stored before."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from tasklogs import inserting
from tasklogs.ingest import _db_time, _parse, ingest_directory
from tasklogs.models import TaskEvent

from .conftest import encode, line

pytestmark = pytest.mark.django_db
LINES = 130  # more than two full multi-row statements on SQLite, and a rest
FILE, OFFSET, DIGEST = (inserting.COLUMNS.index(name) for name in ("file", "offset", "digest"))


def chunk_rows() -> list[inserting.Row]:
    data = encode(*(line(ms=i % 1000, event="progress", status="processing") for i in range(LINES)))
    rows, report = _parse(data, "2025-01-01.jsonl", 0, _db_time())
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
