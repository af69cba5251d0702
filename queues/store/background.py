"""A thread of the process that finishes what a request handed on, so that the request's answer
does not wait for it: the release of a task's dependents past the ending's first step
(dependencies.py, and the PostgreSQL store's).

What it holds is in memory only. Work it has not done when the process dies (a kill, a restart,
a gunicorn worker recycled) is still on disk or in the database for the sweep, whose pass
finishes it, so nothing here needs to survive the process. The thread runs while it has work and
ends when it has none; a forked child starts with none of its parent's.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from .errors import StoreError

logger = logging.getLogger("taskhoster.store")

Item = TypeVar("Item")


class Background(Generic[Item]):
    """Items handed on, run one at a time by `run` in a thread of this process, in the order
    they came."""

    def __init__(self, run: Callable[[Item], None], *, name: str) -> None:
        self._run, self._name = run, name
        self._fresh()

    def _fresh(self) -> None:
        self._pid = os.getpid()
        self._changed = threading.Condition()
        self._items: deque[Item] = deque()
        self._running = False  # a thread is taking items (or about to)

    def hand(self, items: Iterable[Item]) -> None:
        """Queue the items, and start the thread if none runs."""
        if self._pid != os.getpid():  # a forked child: its parent's items and thread are not its
            self._fresh()
        with self._changed:
            self._items.extend(items)
            if self._running or not self._items:
                return
            self._running = True
        threading.Thread(target=self._take, name=self._name, daemon=True).start()

    def _take(self) -> None:
        while True:
            with self._changed:
                if not self._items:
                    self._running = False
                    self._changed.notify_all()
                    return
                item = self._items.popleft()
            try:
                self._run(item)
            except (OSError, StoreError) as exc:  # a disk or a database refusing: the sweep's
                logger.warning("%s: left to the sweep (%s)", self._name, exc)
            except Exception:
                logger.exception("%s failed; the sweep finishes what it left", self._name)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every item handed on so far is done; whether they are (False: timeout)."""
        if self._pid != os.getpid():
            return True  # a forked child has none
        with self._changed:
            return self._changed.wait_for(lambda: not self._running, timeout)
