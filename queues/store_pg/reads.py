"""The PostgreSQL store's reads: one task, a page, the counts, the console's selections."""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from queues.store.errors import NotFound
from queues.store.records import State, Task
from queues.store.results import QueueStats, TaskPage, _Any
from queues.store.selecting import (
    AHEAD_COUNTED,
    Found,
    OrderKey,
    Selection,
    StateCounts,
    key_of,
)

from . import rows
from .writes import Conn

__all__ = ["dict_row", "find", "list_tasks", "read", "state_counts", "stats"]


def read(conn: Conn, host: str, queue: str, task_id: str) -> Task:
    found = conn.execute(
        "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = %s",
        (host, queue, task_id),
    ).fetchone()
    if found is None:
        raise NotFound()
    return rows.task_of(found[0])


def list_tasks(
    conn: Conn,
    host: str,
    queue: str,
    *,
    status: State | None,
    posted_by: str | _Any | None,
    limit: int,
    offset: int,
) -> TaskPage:
    """Newest first by (postedAt, seq, id): post order, as the file store lists."""
    where = [sql.SQL("host = %s AND queue = %s")]
    params: list[Any] = [host, queue]
    if status is not None:
        where.append(sql.SQL("status = ANY(%s)"))
        params.append(rows.status_column(status))
    if posted_by is None:
        where.append(sql.SQL("posted_by IS NULL"))
    elif not isinstance(posted_by, _Any):
        where.append(sql.SQL("posted_by = %s"))
        params.append(posted_by)
    condition = sql.SQL(" AND ").join(where)
    counted = conn.execute(
        sql.SQL("SELECT count(*) FROM th_tasks WHERE {}").format(condition), params
    ).fetchone()
    page = conn.execute(
        sql.SQL(
            "SELECT record::text, seq FROM th_tasks WHERE {}"
            " ORDER BY posted_at DESC, seq DESC, id DESC LIMIT %s OFFSET %s"
        ).format(condition),
        [*params, max(limit, 0), max(offset, 0)],
    ).fetchall()
    return TaskPage(
        count=int(counted[0]) if counted else 0, tasks=[rows.listed_task(*r) for r in page]
    )


# Pending tasks not claimable yet ("waiting"): those waiting out a retry's backoff (after a
# failure, as the file store's index tells them: attempts > 0 and availableAt past their last
# change) are "retrying", the others "delayed".
_STATS = """
SELECT
    count(*) FILTER (WHERE status IN ('pending', 'waiting')),
    count(*) FILTER (WHERE status = 'processing'),
    count(*) FILTER (WHERE status NOT IN ('pending', 'waiting', 'processing')),
    count(*) FILTER (WHERE status = 'pending' AND available_at > %(now)s
                     AND NOT (attempts > 0 AND available_at > updated_at)),
    count(*) FILTER (WHERE status = 'pending' AND available_at > %(now)s
                     AND attempts > 0 AND available_at > updated_at),
    count(*) FILTER (WHERE status = 'finished'),
    count(*) FILTER (WHERE status = 'failed'),
    count(*) FILTER (WHERE status = 'cancelled'),
    min(posted_at) FILTER (WHERE status IN ('pending', 'waiting'))
FROM th_tasks WHERE host = %(host)s AND queue = %(queue)s
"""


# The claim's order (th_tasks_claim): priority first, then post order; the task's own row gives
# its place, and only a claimable row ('pending', its time come) is counted.
_AHEAD = """
SELECT count(*) FROM (
    SELECT 1 FROM th_tasks o,
        (SELECT priority, posted_at, seq FROM th_tasks
         WHERE host = %(host)s AND queue = %(queue)s AND id = %(id)s) AS me
    WHERE o.host = %(host)s AND o.queue = %(queue)s AND o.status = 'pending'
        AND o.available_at <= %(now)s
        AND (o.priority > me.priority
             OR (o.priority = me.priority AND (o.posted_at, o.seq) < (me.posted_at, me.seq)))
    LIMIT %(most)s
) AS ahead
"""


def claimable_ahead(conn: Conn, host: str, queue: str, task_id: str, *, now: int) -> int:
    """selecting.claimable_ahead's answer from the table."""
    params = {"host": host, "queue": queue, "id": task_id, "now": now, "most": AHEAD_COUNTED}
    found = conn.execute(_AHEAD, params).fetchone()
    return int(found[0]) if found else 0


def _counts(conn: Conn, host: str, queue: str, now: int) -> tuple[int, ...]:
    found = conn.execute(_STATS, {"host": host, "queue": queue, "now": now}).fetchone()
    assert found is not None
    return tuple(found)


def stats(conn: Conn, host: str, queue: str, *, now: int) -> QueueStats:
    pending, processing, done, delayed, retrying, _, _, _, oldest = _counts(conn, host, queue, now)
    return QueueStats(
        pending=pending,
        processing=processing,
        done=done,
        delayed=delayed,
        retrying=retrying,
        oldest_pending_ms=max(now - oldest, 0) if oldest is not None else 0,
    )


def state_counts(conn: Conn, host: str, queue: str, *, now: int) -> StateCounts:
    pending, processing, _, delayed, retrying, finished, failed, cancelled, _ = _counts(
        conn, host, queue, now
    )
    return StateCounts(pending=pending, delayed=delayed, retrying=retrying,
                       processing=processing, finished=finished, failed=failed,
                       cancelled=cancelled)  # fmt: skip


def find(
    conn: Conn,
    host: str,
    queue: str,
    selection: Selection,
    *,
    newest_first: bool,
    limit: int,
    offset: int,
    after: OrderKey | None,
    until: OrderKey | None,
    budget: int,
) -> Found:
    """selecting.find's answer from the table: tasks by status and id prefix in (postedAt,
    seq, id) order, from a cursor (`after`) up to a bound (`until`, inclusive); with a test, at most
    `budget` records are tried and the answer says where to go on."""
    limit, offset, budget = max(limit, 0), max(offset, 0), max(budget, 1)
    where: list[sql.Composable] = [sql.SQL("host = %s AND queue = %s")]
    params: list[Any] = [host, queue]
    if selection.status is not None:
        where.append(sql.SQL("status = ANY(%s)"))
        params.append(rows.status_column(selection.status))
    if selection.id_prefix:
        where.append(sql.SQL("starts_with(id, %s)"))
        params.append(selection.id_prefix)
    past, upto = (sql.SQL("<"), sql.SQL(">=")) if newest_first else (sql.SQL(">"), sql.SQL("<="))
    if after is not None:
        where.append(sql.SQL("(posted_at, seq, id) {} (%s, %s, %s)").format(past))
        params += list(after)
    if until is not None:
        where.append(sql.SQL("(posted_at, seq, id) {} (%s, %s, %s)").format(upto))
        params += list(until)
    condition = sql.SQL(" AND ").join(where)
    order = sql.SQL("posted_at DESC, seq DESC, id DESC" if newest_first else "posted_at, seq, id")
    query = sql.SQL(
        "SELECT record::text, seq FROM th_tasks WHERE {} ORDER BY {} LIMIT %s OFFSET %s"
    ).format(condition, order)
    if selection.test is not None:
        candidates = conn.execute(query, [*params, budget + 1, 0]).fetchall()
        return _scan([rows.listed_task(*r) for r in candidates], selection, max(limit, 1), budget)
    counted = conn.execute(
        sql.SQL("SELECT count(*) FROM th_tasks WHERE {}").format(condition), params
    ).fetchone()
    count = int(counted[0]) if counted else 0
    tasks = [rows.listed_task(*r) for r in conn.execute(query, [*params, limit, offset])]
    more = offset + limit < count
    last = key_of(tasks[-1]) if more and tasks else None
    return Found(tasks=tasks, count=count, read=len(tasks), next_after=last)


def _scan(candidates: list[Task], selection: Selection, limit: int, budget: int) -> Found:
    """Try candidates in order until `limit` pass the test or `budget` were tried."""
    assert selection.test is not None
    tasks: list[Task] = []
    read = 0
    last: OrderKey | None = None
    for task in candidates:
        if len(tasks) >= limit or read >= budget:
            return Found(tasks=tasks, count=None, next_after=last, read=read)
        last = key_of(task)
        read += 1
        if selection.test(task):
            tasks.append(task)
    return Found(tasks=tasks, count=None, next_after=None, read=read)
