"""The sweep's three rules on a PostgreSQL queue: queue timeout, lease timeout (with the
attempt budget and the backoff's requeue) and retention; then the event rows and archived
payloads past log_retain_days.

Each rule's candidates are found by an indexed query and taken in batches of BATCH rows with
FOR UPDATE SKIP LOCKED, each batch one transaction. Every row taken is judged again by the
shared verdict (rules.verdict) on its record as locked, and changed (or deleted) with its
event in that transaction. A sweep running at the same moment in another process or on
another machine skips the rows this one holds and, once this one commits, no longer finds
them: no task is acted on twice. A worker's finish racing the sweep waits for the row lock
and then finds the lease gone (lease_lost), as on the file store.
"""

from __future__ import annotations

from psycopg import sql

from queues.store import rules
from queues.store.records import Task
from queues.store.settings import QueueSettings
from queues.store.sweep import SweepReport

from . import dependencies, groups, rows
from .writes import Conn, Writer

BATCH = 500

# Live tasks past their queue-timeout window, or holding a lapsed lease. These conditions only
# narrow the rows read; each row is judged by the shared verdict (the preview reads them too).
LIVE_DUE = sql.SQL("""
    (status IN ('pending', 'processing') AND window_start < %(window)s)
    OR (status = 'processing' AND lease_until <= %(now)s)""")
# ended tasks whose retention is over (rules.retention_over, which judges each row again)
ENDED_DUE = sql.SQL("""
    status IN ('finished', 'failed', 'cancelled') AND (
        (NOT %(fetched)s AND coalesce(finished_at, updated_at) + %(retain)s <= %(now)s)
        OR (%(fetched)s AND fetched_at IS NULL
            AND coalesce(finished_at, updated_at) + %(max_retain)s <= %(now)s)
        OR (%(fetched)s AND fetched_at + %(retain)s <= %(now)s))""")
_BATCH_OF = sql.SQL("""
SELECT seq, record::text FROM th_tasks
WHERE host = %(host)s AND queue = %(queue)s AND seq > %(after)s AND ({})
ORDER BY seq LIMIT %(batch)s FOR UPDATE SKIP LOCKED
""")
_LIVE = _BATCH_OF.format(LIVE_DUE)
_ENDED = _BATCH_OF.format(ENDED_DUE)


def due_params(host: str, queue: str, settings: QueueSettings, *, now: int) -> dict[str, object]:
    """The parameters of LIVE_DUE and ENDED_DUE for one queue's settings at `now`."""
    return {
        "host": host,
        "queue": queue,
        "now": now,
        "window": now - settings.queue_seconds * 1000,
        "fetched": settings.retain_from == "fetched",
        "retain": settings.retain_seconds * 1000,
        "max_retain": settings.max_retain_seconds * 1000,
    }


def sweep_queue(
    conn: Conn,
    writer: Writer,
    host: str,
    queue: str,
    settings: QueueSettings,
    *,
    now: int,
    retain_days: int,
    events: sql.Identifier,
) -> SweepReport:
    report = SweepReport(queues=1)
    dependencies.sweep_dependents(conn, writer.apply_released, host, queue, now=now)
    groups.sweep_groups(conn, writer, host, queue, now=now)
    params = {**due_params(host, queue, settings, now=now), "batch": BATCH}
    for query in (_LIVE, _ENDED):
        after = 0
        while True:
            with conn.transaction():
                found = conn.execute(query, {**params, "after": after}).fetchall()
                if not found:
                    break
                after = int(found[-1][0])
                _judge(conn, writer, [rows.task_of(r[1]) for r in found], settings, now, report)
            if len(found) < BATCH:
                break
    report.logs_pruned = _prune(conn, host, queue, now=now, days=retain_days, events=events)
    return report


def _judge(
    conn: Conn,
    writer: Writer,
    tasks: list[Task],
    settings: QueueSettings,
    now: int,
    report: SweepReport,
) -> None:
    changes: list[rules.Change] = []
    cleaned: list[Task] = []
    for task in tasks:
        source = rows.DIRECTORY[task.status]
        found = rules.verdict(source, task, settings, now)
        if found == "cleaned":
            cleaned.append(task)
            continue
        change = None if found is None else rules.plan_sweep(found, task, source, now=now)
        if change is None:
            continue
        changes.append(change)
        ended = ("timeout", "failed", "cancelled")
        name = change.event if change.event in ended else "requeue"
        setattr(report, name, getattr(report, name) + 1)
    writer.apply(conn, changes, now=now, worker=None, settings=settings, lease_worker=True)
    writer.remove(conn, cleaned, now=now, event="cleaned")
    report.cleaned += len(cleaned)


def _prune(
    conn: Conn, host: str, queue: str, *, now: int, days: int, events: sql.Identifier
) -> int:
    """The queue's event rows and archived payloads older than `days` (a task's payloads go
    together, once its newest is that old, as the file archive's folders do)."""
    cutoff = now - days * 86_400_000
    with conn.transaction():
        lines = conn.execute(
            sql.SQL(
                "DELETE FROM {} WHERE host = %s AND queue = %s AND file = %s AND t < %s"
            ).format(events),
            (host, queue, rows.EVENT_FILE, cutoff // 1000),
        ).rowcount
        payloads = conn.execute(
            "DELETE FROM th_payloads WHERE host = %(host)s AND queue = %(queue)s AND task_id IN"
            " (SELECT task_id FROM th_payloads WHERE host = %(host)s AND queue = %(queue)s"
            "  GROUP BY task_id HAVING max(at) < %(cutoff)s)",
            {"host": host, "queue": queue, "cutoff": cutoff},
        ).rowcount
    return lines + payloads
