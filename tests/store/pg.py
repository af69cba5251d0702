"""The PostgreSQL side of the store tests: a server to test against, a database of this run's
own, a fresh schema per test, and a harness with the file harness's readers.

The server is TASKHOSTER_TEST_DATABASE_URL's. Its database (the shared `test`) is only
connected to, to create this run's database (`th_store_<pid>_<random>`), which the run drops
when it ends; each test's store lives in a schema of its own in it. No server: the postgres
tests skip, saying so, unless TASKHOSTER_REQUIRE_POSTGRES=1 (CI), where they fail.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import secrets
from collections.abc import Iterator
from typing import Any

import environ
import orjson
import psycopg
import pytest
from psycopg import conninfo, sql
from psycopg.rows import dict_row

from queues.store.records import Task
from queues.store.rules import Change
from queues.store_pg import PgStoreConfig, PostgresStore
from queues.store_pg.rows import DIRECTORY, TASK_COLUMNS, line_of, task_values

from .conftest import SETTINGS, Verbs

URL_VARIABLE = "TASKHOSTER_TEST_DATABASE_URL"


def _server_dsn() -> str:
    """The server's libpq parameters (its own database), from the URL the project uses."""
    config = environ.Env.db_url_config(os.environ[URL_VARIABLE])
    return conninfo.make_conninfo(
        host=config["HOST"] or None,
        port=config["PORT"] or None,
        user=config["USER"] or None,
        password=config["PASSWORD"] or None,
        dbname=config["NAME"],
        connect_timeout=3,
    )


@functools.cache
def _why_not() -> str | None:
    """None when the server answers; else why the postgres tests cannot run."""
    if not os.environ.get(URL_VARIABLE):
        return f"{URL_VARIABLE} is not set"
    try:
        psycopg.connect(_server_dsn()).close()
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"no PostgreSQL server at {os.environ[URL_VARIABLE]} ({first})"
    return None


def require_server() -> None:
    """Skip (or, where the run requires PostgreSQL, fail) when no server answers."""
    reason = _why_not()
    if reason is None:
        return
    if os.environ.get("TASKHOSTER_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL is required here (TASKHOSTER_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(f"postgres store tests skipped: {reason}")


_database: str | None = None
_schemas = itertools.count(1)


def database_dsn() -> str:
    """This run's own database, created on first use (dropped by drop_database)."""
    global _database
    require_server()
    if _database is None:
        name = f"th_store_{os.getpid()}_{secrets.token_hex(4)}"
        with psycopg.connect(_server_dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        _database = name
    return conninfo.make_conninfo(_server_dsn(), dbname=_database)


def drop_database() -> None:
    global _database
    if _database is None:
        return
    with psycopg.connect(_server_dsn(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(_database))
        )
    _database = None


def fresh_config(**options: Any) -> PgStoreConfig:
    """A store config on a schema no other test has used (poll_seconds short: the tests wait
    for notifications, and a lost one must not cost a second)."""
    schema = f"t{next(_schemas)}_{secrets.token_hex(3)}"
    return PgStoreConfig(dsn=database_dsn(), schema=schema, **options)


class PgHarness(Verbs):
    """The file harness's face (conftest.Harness) over a PostgresStore: where a task is (the
    directory its status maps to), its record, the event lines (rows as lines)."""

    kind = "postgres"

    def __init__(self, config: PgStoreConfig | None = None) -> None:
        self.config = config or fresh_config()
        self.store = PostgresStore(self.config)
        self._reader: psycopg.Connection[dict[str, Any]] | None = None

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """The harness's own connection (one for the test: the readers run often)."""
        if self._reader is None or self._reader.closed:
            self._reader = psycopg.connect(self.config.dsn, autocommit=True, row_factory=dict_row)
            self._reader.execute(
                sql.SQL("SET search_path TO {}").format(sql.Identifier(self.config.schema))
            )
        yield self._reader

    def on_disk(self, task_id: str) -> dict[str, dict[str, Any]]:
        """{directory: record}: the row's record under the directory its status maps to."""
        with self._conn() as conn:
            row = conn.execute("SELECT record FROM th_tasks WHERE id = %s", (task_id,)).fetchone()
        if row is None:
            return {}
        record = row["record"]
        return {DIRECTORY[_state(record["status"])]: record}

    def where(self, task_id: str) -> list[str]:
        return sorted(self.on_disk(task_id))

    def events(self, task_id: str | None = None) -> list[dict[str, Any]]:
        with self._conn() as conn:
            found = conn.execute(
                sql.SQL("SELECT * FROM {} ORDER BY id").format(
                    sql.Identifier(self.config.events_table)
                )
            ).fetchall()
        lines = [line_of(row) for row in found]
        return [line for line in lines if task_id is None or line["id"] == task_id]

    def event_names(self, task_id: str) -> list[str]:
        return [e["event"] for e in self.events(task_id)]

    def stored(self) -> list[Any]:
        """Everything the store holds, to compare before and after a refused call."""
        with self._conn() as conn:
            return [
                conn.execute(
                    sql.SQL("SELECT * FROM {} ORDER BY 1, 2").format(sql.Identifier(t))
                ).fetchall()
                for t in ("th_queues", "th_tasks", "th_payloads", self.config.events_table)
            ]

    def count(self, directory: str) -> int:
        """How many tasks are in the state whose directory this is."""
        with self._conn() as conn:
            found = conn.execute("SELECT status FROM th_tasks").fetchall()
        return sum(1 for row in found if DIRECTORY[_state(row["status"])] == directory)

    def keys(self) -> int:
        """How many Idempotency-Keys the queue keeps (each lives in its task's row)."""
        with self._conn() as conn:
            found = conn.execute(
                "SELECT count(*) AS n FROM th_tasks WHERE idempotency_key IS NOT NULL"
            ).fetchone()
        return int(found["n"]) if found else 0

    # the store's one place that writes tasks (writes.Writer), called directly
    def write_change(self, old: Task, new: Task, event: str | None, *, now: int) -> None:
        change = Change(DIRECTORY[old.status], old, new, event)
        with self.store._pool.connection() as conn, conn.transaction():
            self.store._writer.apply(conn, [change], now=now, worker=None, settings=SETTINGS)

    def write_removal(self, task: Task, *, now: int) -> None:
        with self.store._pool.connection() as conn, conn.transaction():
            self.store._writer.remove(conn, [task], now=now, event="cleaned")

    def write_new(self, task: Task, *, now: int) -> None:
        with self.store._pool.connection() as conn, conn.transaction():
            self.store._writer.insert(conn, [task], now=now, settings=SETTINGS)

    def plant(self, directory: str, record: dict[str, Any]) -> None:
        """Write a record by hand: its row, as the store would hold it."""
        task = Task.from_record(record)
        assert DIRECTORY[task.status] == directory, "a row's place is its status"
        columns = sql.SQL(", ").join(
            sql.Identifier(c) for c in ("host", "queue", "id", *TASK_COLUMNS)
        )
        values = sql.SQL(", ").join(sql.Placeholder() for _ in range(3 + len(TASK_COLUMNS)))
        with self._conn() as conn:
            conn.execute(
                sql.SQL("INSERT INTO th_tasks ({}) VALUES ({})").format(columns, values),
                (
                    task.host,
                    task.queue,
                    task.id,
                    *task_values(task)[:-1],
                    orjson.dumps(record).decode(),
                ),
            )

    def opener(self, *, fsync: bool = False) -> Any:
        """How a child process opens this store (procs.StoreOpener)."""
        from .procs import StoreOpener

        return StoreOpener(pg=self.config)

    def archived_tasks(self) -> list[str]:
        """The ids of the tasks with archived payloads."""
        with self._conn() as conn:
            found = conn.execute("SELECT DISTINCT task_id FROM th_payloads ORDER BY 1").fetchall()
        return [row["task_id"] for row in found]

    def archive(self, task_id: str) -> dict[str, bytes]:
        """{file name: bytes} of the task's archived payloads."""
        with self._conn() as conn:
            found = conn.execute(
                "SELECT name, body FROM th_payloads WHERE task_id = %s", (task_id,)
            ).fetchall()
        return {row["name"]: bytes(row["body"]) for row in found}

    def temp_files(self) -> list[str]:
        return []  # a transaction leaves nothing half-written behind

    def close(self) -> None:
        self.store.close()

    def drop(self) -> None:
        self.close()
        with self._conn() as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(self.config.schema)
                )
            )
        if self._reader is not None:
            self._reader.close()

    def reopen(self) -> None:
        """A restart: a new store (new connections, a new listener) on the same tables."""
        self.close()
        self.store = PostgresStore(self.config)


def _state(status: str) -> Any:
    from queues.store.records import State
    from queues.store_pg.rows import WAITING

    return State.PENDING if status == WAITING else State(status)
