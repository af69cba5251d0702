"""A small pool of psycopg connections: a verb borrows one for its transaction.

psycopg_pool is not a dependency; this needs only a lock and a list. A connection that broke
(the server restarted, the network dropped) is closed instead of being returned, so the next
borrower opens a fresh one, and the idle ones go with it, since what broke one (a restart, a
failover) has broken them all; an idle one the server ended meanwhile (an idle timeout) is
noticed before it is lent.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from queues.store.errors import StorageUnavailable


class Pool:
    def __init__(self, dsn: str, *, schema: str, size: int) -> None:
        self.dsn, self.schema, self.size = dsn, schema, size
        self._idle: list[psycopg.Connection[tuple[Any, ...]]] = []
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False

    def open(self, *, application_name: str | None = None) -> psycopg.Connection[tuple[Any, ...]]:
        """A new connection of our own (autocommit: every transaction is an explicit block),
        with the store's schema first on its search path."""
        dsn = self.dsn
        if application_name is not None:
            dsn = psycopg.conninfo.make_conninfo(dsn, application_name=application_name)
        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.OperationalError as exc:
            raise StorageUnavailable(f"The task database is not reachable: {exc}") from exc
        try:
            conn.execute(
                sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema))
            )
        except psycopg.OperationalError as exc:  # it went away just after letting us in
            conn.close()
            raise StorageUnavailable(f"The task database went away: {exc}") from exc
        return conn

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        self._slots.acquire()
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is not None and _ended_by_server(conn):
                conn.close()
                conn = None
            if conn is None:
                conn = self.open()
            try:
                yield conn
            except psycopg.OperationalError as exc:
                conn.close()
                # The server usually drops every connection at once (a restart, a failover):
                # the idle ones are let go too, so this call is the only one refused for it.
                self._drop_idle()
                raise StorageUnavailable(f"The task database went away: {exc}") from exc
            except BaseException:
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.close()
                raise
            finally:
                if not conn.closed:
                    with self._lock:
                        if self._closed:
                            conn.close()
                        else:
                            self._idle.append(conn)
        finally:
            self._slots.release()

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A borrowed connection in one transaction, in pipeline mode: the statements a verb
        sends after its read (the write, the event row, the NOTIFY) and the COMMIT travel
        together, so a verb costs two round trips to the server however many it sends."""
        with self.connection() as conn, conn.pipeline(), conn.transaction():
            yield conn

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._drop_idle()

    def _drop_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _ended_by_server(conn: psycopg.Connection[tuple[Any, ...]]) -> bool:
    """Whether the server ended an idle connection: closed on our side, or its socket readable
    (an idle session is sent nothing, so anything there is the server's farewell or EOF)."""
    if conn.closed:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)
