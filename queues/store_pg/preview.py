"""What the next sweep would do to a PostgreSQL queue with given settings, changing nothing.

The file store's preview (queues/store/sweep_preview.py) on the table: the rows the sweep's
candidate conditions find (sweeping.LIVE_DUE, ENDED_DUE) are each judged by the sweep's own
verdict (rules.verdict) and counted. One READ ONLY transaction with no row locks: a sweep
running meanwhile is neither held up nor changed, and the preview cannot write.
"""

from __future__ import annotations

from psycopg import sql

from queues.store.rules import verdict
from queues.store.settings import QueueSettings
from queues.store.sweep_preview import SAMPLE, SweepPreview

from . import rows
from .sweeping import ENDED_DUE, LIVE_DUE, due_params
from .writes import Conn

# in id order, so the samples are the smallest ids of each kind, as the file store's
_DUE = sql.SQL(
    "SELECT record::text FROM th_tasks"
    " WHERE host = %(host)s AND queue = %(queue)s AND (({}) OR ({})) ORDER BY id"
).format(LIVE_DUE, ENDED_DUE)


def preview_queue(
    conn: Conn, host: str, queue: str, settings: QueueSettings, *, now: int
) -> SweepPreview:
    preview = SweepPreview()
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        with conn.cursor() as cur:
            for (record,) in cur.execute(_DUE, due_params(host, queue, settings, now=now)):
                task = rows.task_of(record)
                kind = verdict(rows.DIRECTORY[task.status], task, settings, now)
                if kind is None:
                    continue
                preview.counts[kind] += 1
                if len(preview.samples[kind]) < SAMPLE:
                    preview.samples[kind].append(task.id)
    return preview
