"""Dependencies on the PostgreSQL store: who waits for a task (th_dependencies), and the
release of the waiting tasks in the very transaction that ends it.

A waiting task's row says `waiting` in its status column (its record says pending), so the
claim's and the queue timeout's partial indexes never hold it (rows.WAITING). A post locks each
task it names FOR SHARE while it inserts its dependency rows: an ending (which holds the row
FOR UPDATE) either commits first, and the post sees the task ended, or waits for the post's
commit, and then finds its rows. The ending releases its waiters in its own transaction, so no
crash separates the two; the sweep's pass (sweep_dependents) still releases what an ending by
some other way left (a row deleted by hand, say), as the file store's sweep does.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from typing import Any

import psycopg

from queues.store import rules
from queues.store.errors import NotFound
from queues.store.records import State, Task
from queues.store.rules import Change

from . import rows

Conn = psycopg.Connection[tuple[Any, ...]]
# Writer.apply for one change, with the release turned off (this module runs its own loop)
Apply = Callable[[Conn, Change, int], None]

_SHARE = "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = %s FOR SHARE"
_LOCK = "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = %s FOR UPDATE"
_WAITERS = (
    "DELETE FROM th_dependencies WHERE host = %s AND queue = %s AND id = %s"
    " RETURNING waiter_queue, waiter_id"
)


def prepare(conn: Conn, task: Task) -> tuple[Task, dict[str, State]]:
    """A new task with `after` made ready to insert, in the post's transaction: each task it
    names locked FOR SHARE (NotFound for one that is not there), `waitingFor` those not
    finished, a th_dependencies row for each of them. Returns the task and the ended ones
    among them (a failed one ends the new task as soon as it is inserted: settle_new)."""
    if not task.after:
        return task, {}
    statuses: dict[str, State] = {}
    for ref in task.after:
        queue, task_id = rules.split_ref(ref)
        found = conn.execute(_SHARE, (task.host, queue, task_id)).fetchone()
        if found is None:
            raise NotFound()
        statuses[ref] = rows.task_of(found[0]).status
    waiting = [ref for ref in task.after if statuses[ref] is not State.FINISHED]
    register(conn, task, waiting)
    ended = {ref: statuses[ref] for ref in waiting if statuses[ref].terminal}
    return dataclasses.replace(task, waiting_for=waiting or None), ended


def register(conn: Conn, task: Task, waiting: list[str]) -> None:
    """A th_dependencies row naming `task` as a waiter of each task of `waiting` (a row its
    earlier wait left, for a retried task, stays as it is)."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO th_dependencies (host, queue, id, waiter_queue, waiter_id)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [(task.host, *rules.split_ref(ref), task.queue, task.id) for ref in waiting],
        )


_READ = "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = %s"


def retry_statuses(conn: Conn, host: str, queue: str, task_id: str) -> dict[str, State | None]:
    """For the retry of a task: the status of each task it was posted to run after (None: gone),
    each locked FOR SHARE until the retry commits, so none ends unseen in between. Taken
    before the task's own row is locked, as an ending locks a dependency and then its waiters:
    the two never wait for each other. {} for a task that is not there (the retry's lock says
    NotFound)."""
    found = conn.execute(_READ, (host, queue, task_id)).fetchone()
    if found is None:
        return {}
    statuses: dict[str, State | None] = {}
    for ref in rows.task_of(found[0]).after or ():
        dep_queue, dep_id = rules.split_ref(ref)
        row = conn.execute(_SHARE, (host, dep_queue, dep_id)).fetchone()
        statuses[ref] = rows.task_of(row[0]).status if row is not None else None
    return statuses


def settle_new(conn: Conn, apply: Apply, task: Task, ended: dict[str, State], *, now: int) -> None:
    """A new task whose dependency had ended (failed or cancelled) when it was posted: ended
    in the post's transaction, as the ending would have."""
    for ref, status in ended.items():
        release_one(conn, apply, ref, status, task.host, task.queue, task.id, now=now)
        return  # the first failed one ends it; the others find it ended


def release_ended(conn: Conn, apply: Apply, ended: list[Task], *, now: int) -> None:
    """Release the waiters of tasks that just ended, in the ending's transaction; a waiter it
    ends has its own waiters released in turn, from a work list (a long chain is no deep
    recursion)."""
    work = deque(ended)
    while work:
        task = work.popleft()
        work.extend(release_dependents(conn, apply, task.host, task.queue, task.id,
                                       task.status, now=now))  # fmt: skip


def release_dependents(
    conn: Conn, apply: Apply, host: str, queue: str, task_id: str, ended: State | None, *, now: int
) -> list[Task]:
    """Release every waiter of one ended (or gone: None) task and delete its rows; the waiters
    this ended (their own waiters are the caller's to release)."""
    waiters = conn.execute(_WAITERS, (host, queue, task_id)).fetchall()
    ref = f"{queue}/{task_id}"
    out: list[Task] = []
    for waiter_queue, waiter_id in sorted(waiters):
        task = release_one(conn, apply, ref, ended, host, waiter_queue, waiter_id, now=now)
        if task is not None and task.status.terminal:
            out.append(task)
    return out


def release_one(
    conn: Conn,
    apply: Apply,
    dependency: str,
    ended: State | None,
    host: str,
    queue: str,
    task_id: str,
    *,
    now: int,
) -> Task | None:
    """Apply the end of `dependency` to one waiter, its row locked; the waiter as written, or
    None when it changed nothing (gone, or no longer waiting for it)."""
    found = conn.execute(_LOCK, (host, queue, task_id)).fetchone()
    if found is None:
        return None
    task = rows.task_of(found[0])
    change = rules.plan_release(task, rows.DIRECTORY[task.status], dependency, ended, now=now)
    if change is None:
        return None
    apply(conn, change, now)
    return change.new


_ENDED_AWAITED = """
SELECT DISTINCT d.id, t.record::text FROM th_dependencies d
LEFT JOIN th_tasks t ON (t.host, t.queue, t.id) = (d.host, d.queue, d.id)
WHERE d.host = %s AND d.queue = %s
  AND (t.id IS NULL OR t.status IN ('finished', 'failed', 'cancelled'))
"""


def sweep_dependents(conn: Conn, apply: Apply, host: str, queue: str, *, now: int) -> int:
    """The sweep's pass: the waiters of every ended (or gone) task of the queue that still has
    dependency rows are released, each such task in a transaction of its own. Costs what the
    queue's awaited tasks are; returns how many tasks it released the waiters of."""
    with conn.transaction():
        awaited = conn.execute(_ENDED_AWAITED, (host, queue)).fetchall()
    for task_id, record in awaited:
        status = rows.task_of(record).status if record is not None else None
        with conn.transaction():
            if record is not None:  # held while its waiters change, as an ending holds it
                conn.execute(_LOCK, (host, queue, task_id))
            ended = release_dependents(conn, apply, host, queue, task_id, status, now=now)
            release_ended(conn, apply, ended, now=now)
    return len(awaited)
