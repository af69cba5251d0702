"""The one place the PostgreSQL store changes tasks: inside the caller's transaction, each
change is checked against the transition table (records.check_transition), its row written,
its bodies archived (th_payloads), its event row inserted and a NOTIFY sent, so all of them
commit together or none does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
import psycopg
from psycopg import sql

from queues.store import archive, posting
from queues.store.errors import NotFound
from queues.store.eventlog import NO_REASON, Because
from queues.store.records import Task, check_transition
from queues.store.rules import Change
from queues.store.settings import QueueSettings

from . import dependencies, groups, rows

Conn = psycopg.Connection[tuple[Any, ...]]
CHANNEL = "taskhoster"  # NOTIFY's channel; the payload is "host/queue/task_id/event"


def _recordset(columns: tuple[str, ...], types: tuple[str, ...]) -> sql.Composable:
    """A batch's rows as one JSON parameter, unpacked by the server into the typed row `v`.
    One text parameter, where an array per column made psycopg escape every element of
    every array in Python (most of a batch's client time)."""
    return sql.SQL("json_to_recordset(%s::json) AS v({})").format(
        sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
            for c, t in zip(columns, types, strict=True)
        )
    )


def _rows_json(columns: tuple[str, ...], values: list[tuple[Any, ...]]) -> str:
    return orjson.dumps([dict(zip(columns, row, strict=True)) for row in values]).decode()


def _value(column: str) -> sql.Composable:
    """A column's value from the unpacked row `v` (the record's text is json again)."""
    value = sql.SQL("v.{}").format(sql.Identifier(column))
    return sql.SQL("{}::json").format(value) if column == "record" else value


_ID_TASK_COLUMNS = ("id", *rows.TASK_COLUMNS)
_ID_TASK_TYPES = ("text", *rows.TASK_TYPES)
# Every change of a call in one statement: the rows' new values, joined on the id. Composed
# once into text: psycopg then caches the statement's parse, which it does not for sql objects.
_UPDATE_MANY = (
    sql.SQL(
        "UPDATE th_tasks AS t SET {} FROM {} WHERE t.host = %s AND t.queue = %s AND t.id = v.id"
    )
    .format(
        sql.SQL(", ").join(
            sql.SQL("{} = {}").format(sql.Identifier(c), _value(c)) for c in rows.TASK_COLUMNS
        ),
        _recordset(_ID_TASK_COLUMNS, _ID_TASK_TYPES),
    )
    .as_string(None)
)
_INSERT_MANY = (
    sql.SQL("INSERT INTO th_tasks (host, queue, id, {}) SELECT %s, %s, v.id, {} FROM {}")
    .format(
        sql.SQL(", ").join(sql.Identifier(c) for c in rows.TASK_COLUMNS),
        sql.SQL(", ").join(_value(c) for c in rows.TASK_COLUMNS),
        _recordset(_ID_TASK_COLUMNS, _ID_TASK_TYPES),
    )
    .as_string(None)
)
_NOTIFY_MANY = "SELECT pg_notify(%s, note) FROM json_array_elements_text(%s::json) AS note"
_INSERT = sql.SQL(
    "INSERT INTO th_tasks (host, queue, id, key_item_hash, {}) VALUES (%s, %s, %s, %s, {})"
).format(
    sql.SQL(", ").join(sql.Identifier(column) for column in rows.TASK_COLUMNS),
    sql.SQL(", ").join(sql.Placeholder() for _ in rows.TASK_COLUMNS),
)
# One index probe per id, in id order, whatever the planner believes of the table: with a
# filter on (host, queue) and `id = ANY(...)` it may scan the whole queue when its statistics
# are cold (a new or fast-growing queue), and each batch would cost the queue's depth.
_LOCK_MANY = (
    "SELECT t.record::text FROM unnest(%b::text[]) WITH ORDINALITY AS i(id, n),"
    " LATERAL (SELECT record FROM th_tasks"
    " WHERE host = %s AND queue = %s AND id = i.id FOR UPDATE) AS t ORDER BY i.n"
)
_LOCK_ONE = "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = %s"


def lock(conn: Conn, host: str, queue: str, task_id: str) -> Task:
    """The task's record, its row locked until the transaction ends; NotFound if none."""
    found = conn.execute(_LOCK_ONE + " FOR UPDATE", (host, queue, task_id)).fetchone()
    if found is None:
        raise NotFound()
    return rows.task_of(found[0])


def lock_many(conn: Conn, host: str, queue: str, task_ids: list[str]) -> dict[str, Task]:
    """The records of those of `task_ids` that exist, locked in id order (so two batches
    naming the same tasks cannot wait on each other)."""
    found = conn.execute(_LOCK_MANY, (sorted(task_ids), host, queue)).fetchall()
    tasks = [rows.task_of(row[0]) for row in found]
    return {task.id: task for task in tasks}


class Writer:
    """Writes into one store's tables (the events table is the configured one)."""

    def __init__(self, events_table: str, *, hand_on: dependencies.HandOn | None = None) -> None:
        # where an ending's transaction leaves the waiters past its first RELEASE_STEP
        self.hand_on = hand_on
        columns = sql.SQL(", ").join(sql.Identifier(c) for c in rows.EVENT_COLUMNS)
        # every event row of a call in one statement, in the order given
        self.insert_events = (
            sql.SQL("INSERT INTO {} ({}, {}) SELECT {}, nextval('th_event_offsets') FROM {}")
            .format(
                sql.Identifier(events_table),
                columns,
                sql.Identifier("offset"),
                sql.SQL(", ").join(
                    sql.SQL("v.{}").format(sql.Identifier(c)) for c in rows.EVENT_COLUMNS
                ),
                _recordset(rows.EVENT_COLUMNS, rows.EVENT_TYPES),
            )
            .as_string(None)
        )

    def insert(
        self,
        conn: Conn,
        tasks: list[Task],
        *,
        now: int,
        settings: QueueSettings,
        because: Because = NO_REASON,
    ) -> None:
        """New pending tasks (none keyed: keyed posts go through insert_keyed), posted."""
        for task in tasks:
            check_transition(task.id, None, task.status, "posted")
        if tasks:
            values = [(t.id, *rows.task_values(t)) for t in tasks]
            conn.execute(
                _INSERT_MANY,
                (tasks[0].host, tasks[0].queue, _rows_json(_ID_TASK_COLUMNS, values)),
            )
        self._posted(conn, tasks, now=now, settings=settings, because=because)

    def insert_keyed(
        self,
        conn: Conn,
        task: Task,
        *,
        now: int,
        settings: QueueSettings,
        because: Because = NO_REASON,
    ) -> bool:
        """A keyed post: False (nothing written) when its key is taken already."""
        check_transition(task.id, None, task.status, "posted")
        written = conn.execute(
            sql.SQL("{} ON CONFLICT DO NOTHING RETURNING id").format(_INSERT),
            (task.host, task.queue, task.id, posting.item_hash(task.item), *rows.task_values(task)),
        ).fetchone()
        if written is None:
            return False
        self._posted(conn, [task], now=now, settings=settings, because=because)
        return True

    def _posted(
        self, conn: Conn, tasks: list[Task], *, now: int, settings: QueueSettings, because: Because
    ) -> None:
        archived: list[str] = []
        if settings.archive_payloads:
            archived = ["item"]
            self._archive(
                conn, [(t, archive.TASK_FILES["item"], orjson.dumps(t.item)) for t in tasks], now
            )
        self._log(conn, [(t, "posted", None, archived, because) for t in tasks], now=now)

    def apply(
        self,
        conn: Conn,
        changes: list[Change],
        *,
        now: int,
        worker: str | None,
        settings: QueueSettings | None,
        lease_worker: bool = False,
        release: bool = True,
    ) -> list[Task]:
        """Write each change over its locked row, archive its bodies, log its event (naming
        `worker`, or with `lease_worker` the worker whose lease the task had: a requeue or
        a sweep speaks of the worker it took the task from)."""
        for c in changes:
            check_transition(c.new.id, c.old.status, c.new.status, c.event)
        archiving = settings is not None and settings.archive_payloads
        bodies: list[tuple[Task, str, bytes]] = []
        outcomes: list[tuple[Task, str, str, bytes]] = []  # (task, kind, event, body)
        lines: list[tuple[Task, str, str | None, list[str], Because]] = []
        for c in changes:
            kinds: list[str] = []
            if archiving:
                for kind, body in c.archive.items():
                    if kind == "progress":
                        bodies.append((c.new, archive.TASK_FILES[kind], _payload(kind, body)))
                    else:
                        assert c.event is not None, "a body is archived for its event"
                        outcomes.append((c.new, kind, c.event, _payload(kind, body)))
                    kinds.append(kind)
            if c.event is not None:
                named = worker
                if lease_worker:
                    named = c.old.lease.worker if c.old.lease is not None else None
                lines.append((c.new, c.event, named, kinds, c.because))
        if changes:
            values = [(c.new.id, *rows.task_values(c.new)) for c in changes]
            conn.execute(
                _UPDATE_MANY,
                (_rows_json(_ID_TASK_COLUMNS, values), changes[0].new.host, changes[0].new.queue),
            )
        self._archive(conn, [*bodies, *self._outcome_files(conn, outcomes, now)], now)
        self._log(conn, lines, now=now, quiet=[c.new for c in changes if c.event is None])
        ended = [c.new for c in changes if c.new.status.terminal and not c.old.status.terminal]
        if ended and release:  # their first waiters, in this transaction (dependencies.py)
            dependencies.release_ended(conn, self.apply_released, ended, now=now,
                                       hand_on=self.hand_on)  # fmt: skip
        if ended:  # their groups, a release's endings too (groups.py)
            groups.note_ended(conn, self, ended, now=now)
        return [c.new for c in changes]

    def log_line(self, conn: Conn, task: Task, event: str, *, now: int) -> None:
        """One event line of no change of the task's (a group's `callback`, groups.py)."""
        self._log(conn, [(task, event, None, [], NO_REASON)], now=now)

    def apply_released(self, conn: Conn, changes: list[Change], now: int) -> None:
        """The changes of a release, of tasks of one queue (dependencies.py, which releases
        their own waiters itself)."""
        self.apply(conn, changes, now=now, worker=None, settings=None, release=False)

    def remove(
        self, conn: Conn, tasks: list[Task], *, now: int, event: str, because: Because = NO_REASON
    ) -> None:
        """Delete ended tasks (their keys go with their rows), `cleaned` or `deleted`. Their
        archived payloads and their events stay."""
        for task in tasks:
            check_transition(task.id, task.status, None, event)
        with conn.cursor() as cur:
            cur.executemany(
                "DELETE FROM th_tasks WHERE host = %s AND queue = %s AND id = %s",
                [(t.host, t.queue, t.id) for t in tasks],
            )
        self._log(conn, [(t, event, None, [], because) for t in tasks], now=now)

    def _outcome_files(
        self, conn: Conn, outcomes: list[tuple[Task, str, str, bytes]], now: int
    ) -> list[tuple[Task, str, bytes]]:
        """The files of each result, error or edited item, as the file archive writes them:
        its own under the first free history name, and the kind's latest file; before an
        edit, the posted item is kept as POSTED_ITEM (the task's row is locked: one writer)."""
        files: list[tuple[Task, str, bytes]] = []
        for task, kind, event, body in outcomes:
            key = (task.host, task.queue, task.id)
            if kind == "item":
                conn.execute(
                    "INSERT INTO th_payloads (host, queue, task_id, name, body, at)"
                    " SELECT host, queue, task_id, %s, body, %s FROM th_payloads"
                    " WHERE host = %s AND queue = %s AND task_id = %s AND name = %s"
                    " ON CONFLICT DO NOTHING",
                    (archive.POSTED_ITEM, now, *key, archive.LATEST_FILES["item"]),
                )
            taken = {
                str(row[0])
                for row in conn.execute(
                    "SELECT name FROM th_payloads"
                    " WHERE host = %s AND queue = %s AND task_id = %s AND starts_with(name, %s)",
                    (*key, f"{task.attempts}-{event}"),
                )
            }
            taken |= {name for t, name, _ in files if t.id == task.id}
            names = archive.history_names(kind, task.attempts, event)
            own = next(name for name in names if name not in taken)
            files += [(task, own, body), (task, archive.LATEST_FILES[kind], body)]
        return files

    def _archive(self, conn: Conn, bodies: list[tuple[Task, str, bytes]], now: int) -> None:
        """Archive files: progress.jsonl grows by a line, any other name is written once."""
        if not bodies:
            return
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO th_payloads (host, queue, task_id, name, body, at)"
                " VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (host, queue, task_id, name) DO UPDATE SET at = excluded.at,"
                " body = CASE WHEN th_payloads.name = %s"
                " THEN th_payloads.body || excluded.body ELSE excluded.body END",
                [
                    (t.host, t.queue, t.id, name, body, now, archive.TASK_FILES["progress"])
                    for t, name, body in bodies
                ],
            )

    def _log(
        self,
        conn: Conn,
        lines: Iterable[tuple[Task, str, str | None, list[str], Because]],
        *,
        now: int,
        quiet: Iterable[Task] = (),
    ) -> None:
        """Each event's row and its NOTIFY; a change without an event (a heartbeat, a cancel
        asked of a running task) is notified too, since a waiting read waits for any change."""
        lines = list(lines)
        notes = [f"{t.host}/{t.queue}/{t.id}/{event}" for t, event, _, _, _ in lines]
        notes += [f"{t.host}/{t.queue}/{t.id}/" for t in quiet]
        if lines:
            values = [
                rows.event_values(t, event, now=now, worker=w, archived=a, because=b)
                for t, event, w, a, b in lines
            ]
            conn.execute(self.insert_events, (_rows_json(rows.EVENT_COLUMNS, values),))
        if notes:
            conn.execute(_NOTIFY_MANY, (CHANNEL, orjson.dumps(notes).decode()))


def _payload(kind: str, body: Any) -> bytes:
    """The archived file's bytes, as the file archive writes them."""
    data = orjson.dumps(body)
    return data + b"\n" if kind == "progress" else data
