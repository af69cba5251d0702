"""Groups on the PostgreSQL store: a group's row (th_groups) and its members' (th_group_members),
changed in the transactions of the posts and endings themselves, and the callback inserted in
the transaction of the ending that completed the group.

A post inserts its tasks' member rows and raises the group's `posted` in its own transaction
(the group's row locked FOR UPDATE: a post that closes the group and one that adds a member
are one after the other). An ending sets its member row's outcome where none is set yet (a
member retried after its ending counts once) and raises the counts: one row update each,
whatever the group holds. The ending that makes a closed group complete inserts the callback
and notes it on the group's row, all in its transaction, so no crash separates them and two
enders (serialised on the row) post it once. The sweep's pass posts the callback of a complete
group that has none (a group closed by a post whose members were all replays), and deletes a
called-back group once its callback task is gone, as the file store does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import orjson
import psycopg
from psycopg import sql

from queues.store import paths, rules
from queues.store.batch import OnComplete
from queues.store.errors import GroupClosed, NotFound, StoreError
from queues.store.records import Task
from queues.store.results import ANY, GROUP_OUTCOMES, GroupCounts, GroupView, _Any
from queues.store.settings import QueueSettings

Conn = psycopg.Connection[tuple[Any, ...]]
_REMOVALS_MET = 3  # a post that finds its group removed under it this often is refused

# the counts in the order of GROUP_OUTCOMES, then the closing post's onComplete and the callback
_LOCK = (
    "SELECT posted, ended, finished, failed, cancelled, gone, on_complete::text,"
    " callback_queue, callback_id, posted_by FROM th_groups"
    " WHERE host = %s AND queue = %s AND grp = %s"
)
_COUNTED = {
    outcome: sql.SQL(
        "UPDATE th_groups SET ended = ended + 1, {column} = {column} + 1"
        " WHERE host = %s AND queue = %s AND grp = %s"
    )
    .format(column=sql.Identifier(outcome))
    .as_string(None)
    for outcome in GROUP_OUTCOMES
}


class Inserter(Protocol):
    """What of writes.Writer this module uses (writes.py calls it: no import back)."""

    def insert_keyed(
        self, conn: Conn, task: Task, *, now: int, settings: QueueSettings
    ) -> bool: ...

    def log_line(self, conn: Conn, task: Task, event: str, *, now: int) -> None: ...


def register(
    conn: Conn,
    group: str,
    tasks: list[Task],
    *,
    on_complete: OnComplete | None,
    posted_by: str | None,
) -> None:
    """Make the new `tasks` members of their group, in the post's transaction; with
    `on_complete`, close it. GroupClosed if a post closed it already."""
    host, queue = tasks[0].host, tasks[0].queue
    key = (host, queue, group)
    for _ in range(_REMOVALS_MET):
        conn.execute(
            "INSERT INTO th_groups (host, queue, grp, posted_by) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (*key, posted_by),
        )
        found = conn.execute(_LOCK + " FOR UPDATE", key).fetchone()
        if found is not None:
            break
        # there at the insert, and deleted since by the sweep (remove_called_back): the name
        # is free, and the next insert makes a new group
    else:
        raise GroupClosed()
    if found[-1] != posted_by:
        raise NotFound()  # another producer's group: as if it did not exist
    if found[len(GROUP_OUTCOMES) + 2] is not None:
        raise GroupClosed()
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO th_group_members (host, queue, grp, id) VALUES (%s, %s, %s, %s)",
            [(*key, task.id) for task in tasks],
        )
    closing = (
        None
        if on_complete is None
        else orjson.dumps(rules.closing_record(on_complete, posted_by)).decode()
    )
    conn.execute(
        "UPDATE th_groups SET posted = posted + %s, on_complete = %s::json"
        " WHERE host = %s AND queue = %s AND grp = %s",
        (len(tasks), closing, *key),
    )


def note_ended(conn: Conn, writer: Inserter, ended: list[Task], *, now: int) -> None:
    """Count the members among tasks that just ended, in the ending's transaction, and post
    the callback of a group that this made complete."""
    # groups in one order in every transaction: two batch finishes never wait on each other
    for task in sorted(ended, key=lambda t: (t.host, t.queue, t.group or "", t.id)):
        if task.group is None:
            continue
        key = (task.host, task.queue, task.group)
        outcome = task.status.value
        counted = conn.execute(
            "UPDATE th_group_members SET outcome = %s"
            " WHERE host = %s AND queue = %s AND grp = %s AND id = %s AND outcome IS NULL"
            " RETURNING 1",
            (outcome, *key, task.id),
        ).fetchone()
        if counted is None:
            continue  # it ended before (a retry ran it again), or is no member
        conn.execute(_COUNTED[outcome], key)
        _call_back_if_due(conn, writer, *key, now=now)


def _call_back_if_due(
    conn: Conn, writer: Inserter, host: str, queue: str, group: str, *, now: int
) -> None:
    found = conn.execute(_LOCK + " FOR UPDATE", (host, queue, group)).fetchone()
    if found is None:
        return
    counts, closing, callback = _parts(found)
    state = rules.group_state(counts, closed=closing is not None, called_back=callback is not None)
    if state != "complete":
        return
    assert closing is not None
    on_complete, posted_by = rules.closing_of(orjson.loads(closing))
    unfinished = [
        str(row[0])
        for row in conn.execute(
            "SELECT id FROM th_group_members WHERE host = %s AND queue = %s AND grp = %s"
            " AND outcome <> 'finished' ORDER BY id",
            (host, queue, group),
        )
    ]
    task = rules.group_callback(host, queue, group, on_complete, counts, unfinished,
                                posted_by=posted_by, now=now)  # fmt: skip
    conn.execute(
        "INSERT INTO th_queues (host, queue) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        (host, task.queue),
    )
    if not writer.insert_keyed(conn, task, now=now, settings=on_complete.settings):
        raise StoreError("The callback's key is taken, though the group has no callback.")
    writer.log_line(conn, task, "callback", now=now)  # Task Logs tells it from a post
    conn.execute(
        "UPDATE th_groups SET callback_queue = %s, callback_id = %s"
        " WHERE host = %s AND queue = %s AND grp = %s",
        (task.queue, task.id, host, queue, group),
    )


def sweep_groups(conn: Conn, writer: Inserter, host: str, queue: str, *, now: int) -> int:
    """The sweep's pass: the callback of every complete group of the queue that has none,
    each in a transaction of its own; how many it posted."""
    with conn.transaction():
        due = conn.execute(
            "SELECT grp FROM th_groups WHERE host = %s AND queue = %s"
            " AND on_complete IS NOT NULL AND callback_id IS NULL AND ended >= posted",
            (host, queue),
        ).fetchall()
    for (group,) in due:
        with conn.transaction():
            _call_back_if_due(conn, writer, host, queue, str(group), now=now)
    remove_called_back(conn, host, queue)
    return len(due)


def remove_called_back(conn: Conn, host: str, queue: str) -> int:
    """Delete the queue's called-back groups whose callback task is gone (cleaned or deleted,
    and its Idempotency-Key with it), rows and members, in one transaction; how many. A post
    waiting for such a group's row finds it gone and makes a new group (register)."""
    with conn.transaction():
        gone = [
            str(row[0])
            for row in conn.execute(
                "DELETE FROM th_groups g WHERE g.host = %s AND g.queue = %s"
                " AND g.callback_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM th_tasks t"
                " WHERE t.host = g.host AND t.queue = g.callback_queue AND t.id = g.callback_id)"
                " RETURNING g.grp",
                (host, queue),
            )
        ]
        if gone:
            conn.execute(
                "DELETE FROM th_group_members WHERE host = %s AND queue = %s AND grp = ANY(%s)",
                (host, queue, gone),
            )
    return len(gone)


def read_group(
    conn: Conn, host: str, queue: str, group: str, *, seen_by: str | _Any | None = ANY
) -> GroupView:
    """The group's progress; NotFound for a group never posted to, and for one posted by
    another producer than `seen_by` (unless ANY): the query finds no row for either."""
    try:
        paths.validate_queue(group)
    except StoreError as exc:
        raise NotFound() from exc
    if seen_by is ANY:
        found = conn.execute(_LOCK, (host, queue, group)).fetchone()
    else:
        found = conn.execute(_LOCK + " AND (posted_by IS NULL OR posted_by = %s)",
                             (host, queue, group, seen_by)).fetchone()  # fmt: skip
    if found is None:
        raise NotFound()
    counts, closing, callback = _parts(found)
    return GroupView(
        host=host,
        queue=queue,
        group=group,
        state=rules.group_state(
            counts, closed=closing is not None, called_back=callback is not None
        ),
        counts=counts,
        posted_by=found[-1],
        on_complete_queue=None if closing is None else orjson.loads(closing)["queue"],
        callback=callback,
    )


def names(conn: Conn, host: str, queue: str, *, limit: int) -> list[str]:
    """The first `limit` of the queue's groups by name."""
    found = conn.execute(
        'SELECT grp FROM th_groups WHERE host = %s AND queue = %s ORDER BY grp COLLATE "C"'
        " LIMIT %s",
        (host, queue, limit),
    ).fetchall()
    return [row[0] for row in found]


def member_ids(conn: Conn, host: str, queue: str, group: str, *, limit: int) -> Iterator[str]:
    """The first `limit` members of a group, in the order they were posted."""
    for row in conn.execute(
        "SELECT id FROM th_group_members WHERE host = %s AND queue = %s AND grp = %s"
        " ORDER BY seq LIMIT %s",
        (host, queue, group, limit),
    ):
        yield str(row[0])


def _parts(found: tuple[Any, ...]) -> tuple[GroupCounts, str | None, tuple[str, str] | None]:
    n = len(GROUP_OUTCOMES)
    counts = GroupCounts(int(found[0]), int(found[1]), tuple(int(v) for v in found[2 : 2 + n]))
    closing, callback_queue, callback_id = found[2 + n], found[3 + n], found[4 + n]
    callback = None if callback_id is None else (str(callback_queue), str(callback_id))
    return counts, closing, callback
