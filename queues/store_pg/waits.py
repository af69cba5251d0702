"""Waking waiting claims and reads: one LISTEN connection per store, in a daemon thread.

Every change the store commits sends NOTIFY taskhoster 'host/queue/task_id/event' (writes.py).
The listener bumps the (host, queue) generation and wakes its waiters, who then look at the
table again. A waiter never trusts the notification alone: it also looks at the end of every
`poll_seconds`, so a notification lost (the listener reconnecting after the server restarted)
costs at most that long, never a task.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from typing import Any

import psycopg
from psycopg import sql

from queues.store.errors import StorageUnavailable

from .pool import Pool
from .writes import CHANNEL

Key = tuple[str, str]
# Every notification moves this key's generation too (no queue has an empty host): a follower
# holding back rows until other writers finish waits on it (following.py).
ANY_QUEUE: Key = ("", "")
# The listener's application_name, so an operator (and a test) can tell it in pg_stat_activity.
LISTENER_NAME = "taskhoster listen"
# how long the listener blocks on its connection before it looks whether the store closed
LISTEN_TICK = 0.25


class Waits:
    def __init__(self, pool: Pool, *, poll_seconds: float) -> None:
        self._pool, self.poll_seconds = pool, poll_seconds
        self._changed = threading.Condition()
        self._generation: defaultdict[Key, int] = defaultdict(int)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.listening = threading.Event()  # set while the LISTEN connection is up

    def generation(self, key: Key) -> int:
        self._start()
        with self._changed:
            return self._generation[key]

    def wait(self, key: Key, generation: int, seconds: float) -> None:
        """Until the key's generation moves past `generation`, or `seconds` (capped at the
        poll interval) have passed."""
        deadline = time.monotonic() + min(seconds, self.poll_seconds)
        with self._changed:
            while self._generation[key] == generation:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._changed.wait(remaining)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=LISTEN_TICK + 5)

    def _start(self) -> None:
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._listen, name="taskhoster-pg-listen", daemon=True
                )
                self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = self._pool.open(application_name=LISTENER_NAME)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
                # what was notified while no connection listened is lost: every waiter looks
                # again now rather than at the end of its poll
                self._wake_all()
                self.listening.set()
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=LISTEN_TICK):
                        self._wake(note.payload)
            except StorageUnavailable:  # the server is down: the waiters poll meanwhile
                self._stop.wait(min(self.poll_seconds, 1.0))
            except psycopg.Error:  # the connection died (opening it, or listening): open
                self._stop.wait(LISTEN_TICK)  # another, not in a tight loop if it keeps dying
            finally:
                self.listening.clear()
                if conn is not None:
                    with contextlib.suppress(psycopg.Error):
                        conn.close()

    def _wake(self, payload: str) -> None:
        host, _, rest = payload.partition("/")
        queue, _, _ = rest.partition("/")
        with self._changed:
            self._generation[(host, queue)] += 1
            self._generation[ANY_QUEUE] += 1
            self._changed.notify_all()

    def _wake_all(self) -> None:
        with self._changed:
            for key in list(self._generation):
                self._generation[key] += 1
            self._generation[ANY_QUEUE] += 1
            self._changed.notify_all()
