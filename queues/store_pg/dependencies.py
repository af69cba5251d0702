"""Dependencies on the PostgreSQL store: who waits for a task (th_dependencies), and the
release of the waiting tasks in the very transaction that ends it.

A waiting task's row says `waiting` in its status column (its record says pending), so the
claim's and the queue timeout's partial indexes never hold it (rows.WAITING). A post locks each
task it names FOR SHARE while it inserts its dependency rows: an ending (which holds the row
FOR UPDATE) either commits first, and the post sees the task ended, or waits for the post's
commit, and then finds its rows. The ending releases its first waiters in its own
transaction, at most RELEASE_STEP of them (a chain's included), as the file store's ending
does; the rest it hands to the store's background thread, which releases them in transactions
of RELEASE_STEP each, the first one waiting for the ending's commit on the ended task's row.
A dependency row goes in the transaction that releases its waiter, so what a process that died
left (or an ending by some other way, a row deleted by hand) is still there for the sweep's pass
(sweep_dependents), which releases it in the same steps.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from typing import Any

import psycopg

from queues.store import rules
from queues.store.dependencies import RELEASE_STEP, Awaited, Later
from queues.store.errors import NotFound
from queues.store.records import State, Task
from queues.store.rules import Change

from . import rows

Conn = psycopg.Connection[tuple[Any, ...]]
# Writer.apply for changes of one queue, with the release turned off (this module runs its own
# loop)
Apply = Callable[[Conn, list[Change], int], None]
# the store's background (queues.store.background), taking what an ending leaves
HandOn = Callable[[list[Later]], None]

_SHARE = "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = %s FOR SHARE"
_LOCK = "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = %s FOR UPDATE"
_LOCK_MANY = (
    "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = ANY(%s)"
    " ORDER BY id FOR UPDATE"
)
_WAITERS = (
    "DELETE FROM th_dependencies WHERE host = %s AND queue = %s AND id = %s"
    " RETURNING waiter_queue, waiter_id"
)
_SOME_WAITERS = (
    "DELETE FROM th_dependencies WHERE (host, queue, id, waiter_queue, waiter_id) IN ("
    "SELECT host, queue, id, waiter_queue, waiter_id FROM th_dependencies"
    " WHERE host = %s AND queue = %s AND id = %s ORDER BY waiter_queue, waiter_id LIMIT %s)"
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


def release_ended(
    conn: Conn, apply: Apply, ended: list[Task], *, now: int, hand_on: HandOn | None = None
) -> None:
    """Release the waiters of tasks that just ended, in the ending's transaction; a waiter it
    ends has its own waiters released in turn, from a work list (a long chain is no deep
    recursion). With `hand_on`, at most RELEASE_STEP of them: the rest go to it."""
    work: deque[Awaited] = deque((t.host, t.queue, t.id, t.status) for t in ended)
    left = _release(conn, apply, work, now=now, step=None if hand_on is None else RELEASE_STEP)
    if left and hand_on is not None:
        hand_on([(host, queue, task_id, now) for host, queue, task_id, _ in left])


def _release(
    conn: Conn, apply: Apply, work: deque[Awaited], *, now: int, step: int | None
) -> list[Awaited]:
    """Release the waiters of the tasks in `work` (and of the waiters that ends), in the
    caller's transaction; with `step`, stop after that many: what is left of the work."""
    while work and (step is None or step > 0):
        host, queue, task_id, status = work[0]
        ended, looked = release_dependents(conn, apply, host, queue, task_id, status, now=now,
                                           limit=step)  # fmt: skip
        work.extend((t.host, t.queue, t.id, t.status) for t in ended)
        if step is not None:
            if looked >= step:
                break  # the step spent on it, perhaps with rows left: it stays first
            step -= looked
        work.popleft()
    return list(work)


def release_later(conn: Conn, apply: Apply, later: Later) -> None:
    """The background's part (and the sweep's): every waiter of a task an ending handed on,
    in transactions of RELEASE_STEP waiters each, the task's row locked in each (the first
    waits for the ending's commit). A task running again (retried since) keeps its waiters
    for its next ending."""
    host, queue, task_id, now = later
    work: deque[tuple[str, str, str]] = deque([(host, queue, task_id)])
    while work:
        awaited = work[0]
        with conn.transaction():
            found = conn.execute(_LOCK, awaited).fetchone()
            status = rows.task_of(found[0]).status if found is not None else None
            if status is not None and not status.terminal:
                work.popleft()
                continue
            ended, looked = release_dependents(conn, apply, *awaited, status, now=now,
                                               limit=RELEASE_STEP)  # fmt: skip
        work.extend((t.host, t.queue, t.id) for t in ended)
        if looked < RELEASE_STEP:
            work.popleft()


def release_dependents(
    conn: Conn,
    apply: Apply,
    host: str,
    queue: str,
    task_id: str,
    ended: State | None,
    *,
    now: int,
    limit: int | None = None,
) -> tuple[list[Task], int]:
    """Release the waiters of one ended (or gone: None) task, at most `limit` of them, and
    delete their rows; the waiters this ended that others wait for in turn (theirs are the
    caller's to release), and how many rows it took."""
    if limit is None:
        waiters = conn.execute(_WAITERS, (host, queue, task_id)).fetchall()
    else:
        waiters = conn.execute(_SOME_WAITERS, (host, queue, task_id, limit)).fetchall()
    ref = f"{queue}/{task_id}"
    by_queue: dict[str, list[str]] = {}
    for waiter_queue, waiter_id in waiters:
        by_queue.setdefault(str(waiter_queue), []).append(str(waiter_id))
    out: list[Task] = []
    for waiter_queue, ids in sorted(by_queue.items()):
        # the waiters' rows locked in one statement, in id order (as two releases meeting
        # them both take them), and changed in one write
        found = conn.execute(_LOCK_MANY, (host, waiter_queue, sorted(ids))).fetchall()
        changes = []
        for (record,) in found:
            task = rows.task_of(record)
            change = rules.plan_release(task, rows.DIRECTORY[task.status], ref, ended, now=now)
            if change is not None:
                changes.append(change)
        if changes:
            apply(conn, changes, now)
        out += [c.new for c in changes if c.new.status.terminal]
    return _awaited(conn, host, out), len(waiters)


def _awaited(conn: Conn, host: str, tasks: list[Task]) -> list[Task]:
    """The tasks that have waiters of their own, found in one query: a step that failed a
    hundred waiters looks at their rows once, not in a transaction each."""
    if not tasks:
        return []
    found = conn.execute(
        "SELECT DISTINCT queue, id FROM th_dependencies"
        " WHERE host = %s AND queue = ANY(%s) AND id = ANY(%s)",
        (host, sorted({t.queue for t in tasks}), [t.id for t in tasks]),
    ).fetchall()
    awaited = {(str(queue), str(task_id)) for queue, task_id in found}
    return [t for t in tasks if (t.queue, t.id) in awaited]


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
    apply(conn, [change], now)
    return change.new


_ENDED_AWAITED = """
SELECT DISTINCT d.id, t.record::text FROM th_dependencies d
LEFT JOIN th_tasks t ON (t.host, t.queue, t.id) = (d.host, d.queue, d.id)
WHERE d.host = %s AND d.queue = %s
  AND (t.id IS NULL OR t.status IN ('finished', 'failed', 'cancelled'))
"""


def sweep_dependents(conn: Conn, apply: Apply, host: str, queue: str, *, now: int) -> int:
    """The sweep's pass: the waiters of every ended (or gone) task of the queue that still has
    dependency rows are released, in transactions of RELEASE_STEP waiters (release_later).
    Costs what the queue's awaited tasks are; returns how many tasks it released the waiters
    of."""
    with conn.transaction():
        awaited = conn.execute(_ENDED_AWAITED, (host, queue)).fetchall()
    for task_id, _ in awaited:
        release_later(conn, apply, (host, queue, task_id, now))
    return len(awaited)
