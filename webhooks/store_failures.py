"""Failed tasks of PostgreSQL queues: each `failed` or `timeout` row of the store's events table
whose queue's webhook asks for failures becomes a notification, as the day-file lines of file
queues do (failures.py).

The rows are read from the store's database, which may be another than the console's
(TASKHOSTER_PG_STORE_URL); the notifications and the cursor (a LogCursor named after the
events table, its offset an event id) are the console's. Exactly once, across the two:

- A batch's notifications and the cursor's advance are one transaction of the console's
  database, and a notification's source names its row (`pg:<id>:<task>:<event>`, unique), so a
  sweep killed mid-way reads the batch again and makes nothing twice, nor do two sweeps that
  read the same rows; the cursor only moves forward.
- Row ids are drawn from a sequence and their transactions commit out of id order, so "past the
  highest id seen" could skip a row that commits late. The cursor moves only over rows that are
  final (queues/stores/pg_events.py: the store's horizon, whose writers have all ended); rows read
  while a writer was still going are notified too and read again by the next pass, and the
  unique source keeps that to one notification.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction

from queues.models import StoreKind
from queues.stores.pg_events import batches, cursor_name, reading
from queues.stores.router import StoreRouter

from .failed import FAILED_EVENTS, Hooks, failure_body
from .models import Kind, LogCursor, Notification

BATCH = 500


def notify_store_failures(store: StoreRouter, hooks: Hooks, *, now: dt.datetime) -> int:
    """Make a notification for each new failure row of a hooked PostgreSQL queue."""
    hooked = {key: hook for key, hook in hooks.items() if hook.queue.store == StoreKind.POSTGRES}
    if not hooked:
        return 0  # no connection to the store at all, and the cursor stays put
    pg = store.postgres
    cursor, _ = LogCursor.objects.get_or_create(
        name=cursor_name(pg), defaults={"inode": 0, "offset": 0}
    )
    read = reading(pg, cursor.offset)
    if read.after < cursor.offset:  # the table began again: so does its cursor
        LogCursor.objects.filter(pk=cursor.pk).update(offset=read.after)
    made = 0
    for rows, end in batches(pg, read, size=BATCH, events=FAILED_EVENTS):
        notes = [note for row in rows if (note := _note(row, hooked, store, now=now))]
        with transaction.atomic():
            Notification.objects.bulk_create(notes, ignore_conflicts=True)
            if read.settled:  # only forward: a slower sweep must not move it back
                LogCursor.objects.filter(pk=cursor.pk, offset__lt=end).update(offset=end)
        made += len(notes)
    return made


def _note(
    row: dict[str, Any], hooked: Hooks, store: StoreRouter, *, now: dt.datetime
) -> Notification | None:
    hook = hooked.get((row["host"], row["queue"]))
    if hook is None or row["at"] < hook.created_at:
        return None
    body = failure_body(store.of, row["host"], row["queue"], row["task_id"],
                        attempts=row["attempts"], reason=row["event"], at=row["at"])  # fmt: skip
    return Notification(
        webhook=hook,
        kind=Kind.TASK_FAILED,
        task_id=row["task_id"],
        source=f"pg:{row['id']}:{row['task_id']}:{row['event']}",
        body=body,
        next_try_at=now,
        created_at=now,
    )
