"""What a process keeps per queue from inotify (a listing index, a due index): the most recently
used `keep` of them, each closed when it goes (its subscriptions then stop costing events)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from .inotify import ChangeLog
from .paths import QueueDirs


class Closable(Protocol):
    def close(self) -> None: ...


Kept = TypeVar("Kept", bound=Closable)


class PerQueue(Generic[Kept]):
    """One `Kept` per queue, made by `make(qd, changes)` on first use."""

    def __init__(
        self,
        make: Callable[[QueueDirs, ChangeLog | None], Kept],
        changes: Callable[[], ChangeLog | None],
        *,
        keep: int,
    ) -> None:
        self._make = make
        self._changes = changes
        self._keep = keep
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, str], Kept] = OrderedDict()

    def of(self, qd: QueueDirs) -> Kept:
        key = (qd.host, qd.queue)
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                kept = self._kept[key] = self._make(qd, self._changes())
                while len(self._kept) > self._keep:
                    self._kept.popitem(last=False)[1].close()
            self._kept.move_to_end(key)
            return kept

    def drop(self, host: str, queue: str) -> None:
        """The queue was closed (openqueues.py): what was kept of it goes, rebuilt on next use."""
        with self._lock:
            kept = self._kept.pop((host, queue), None)
        if kept is not None:
            kept.close()

    def close(self) -> None:
        with self._lock:
            for kept in self._kept.values():
                kept.close()
            self._kept.clear()
