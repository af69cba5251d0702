"""Copying a PostgreSQL store's event rows into TaskEvent, when the store is in another
database than the console's (TASKHOSTER_PG_STORE_URL): Task Logs then lists a PostgreSQL
queue's events as it lists a file queue's. (On the console's own database the store writes
TaskEvent's rows itself, and there is nothing to copy.)

A copied row is the row as the store would have written it into TaskEvent: file `postgres`,
digest 0, and its offset the row's id in the store's table, so (file, offset, digest), unique,
stores each row once however many ingesters copy it or however often.

An IngestCursor named after the store's events table keeps the id up to which every row is
copied. Each batch is copied and the cursor advanced in one transaction that first locks the
cursor (a peer copying the same batch waits, then finds it done), so an ingester killed at any
moment leaves the rows and the cursor of its last committed batch, and the rerun copies the
rest. Rows commit out of id order (ids are drawn before commit), so the cursor only moves over
rows that are final (queues/stores/pg_events.py); rows copied while a writer was still going are
copied again by the next run, and the unique key keeps them once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.db import transaction

from queues.store_pg import PostgresStore
from queues.stores.kinds import postgres_queues
from queues.stores.pg_events import CURSOR_PREFIX, batches, cursor_name, reading

from .ingest import IngestReport, db_time
from .inserting import Row, insert_ignoring_stored
from .models import IngestCursor

BATCH = 5_000  # rows per transaction


def store_in_use() -> bool:
    """Whether there is anything to copy: a queue's store is PostgreSQL now, or rows were
    copied before (a queue that went back to files keeps its rows there). A site that merely
    names a store database never connects to it."""
    return (
        bool(postgres_queues())
        or IngestCursor.objects.filter(name__startswith=CURSOR_PREFIX).exists()
    )


def copy_store_events(store: PostgresStore) -> IngestReport:
    """Copy the store's event rows past the cursor; answer how many were read (`store_rows`)."""
    report = IngestReport()
    cursor, _ = IngestCursor.objects.get_or_create(
        name=cursor_name(store), defaults={"inode": 0, "offset": 0}
    )
    read = reading(store, cursor.offset)
    if read.after < cursor.offset:  # the table began again: so does its cursor
        IngestCursor.objects.filter(pk=cursor.pk).update(offset=read.after)
    to_db_time = db_time()
    for rows, end in batches(store, read, size=BATCH):
        with transaction.atomic():
            # Held to the commit: a peer copying the same batch waits here for this one.
            locked = IngestCursor.objects.select_for_update().filter(pk=cursor.pk)
            done = locked.values_list("offset", flat=True).get()
            if done < end:
                insert_ignoring_stored([_row(row, to_db_time) for row in rows])
                if read.settled:  # only forward, and only over final rows
                    locked.filter(offset__lt=end).update(offset=end)
        report.store_rows += len(rows)
    return report


def _row(row: dict[str, Any], to_db_time: Callable[[dt.datetime], object]) -> Row:
    """TaskEvent's columns (inserting.COLUMNS' order) of one store row."""
    return (
        row["t"],
        to_db_time(row["at"].astimezone(dt.UTC)),  # in the session's zone as read: UTC, as parsed
        row["host"],
        row["queue"],
        row["task_id"],
        row["event"],
        row["status"],
        row["attempts"],
        row["worker"],
        row["bytes_item"],
        row["bytes_progress"],
        row["bytes_result"],
        row["bytes_error"],
        row["archived"],
        row["by"],
        row["origin"],
        row["edited"],
        row["lapsed"],
        row["reason"],
        row["file"],
        row["id"],
        0,
    )
