"""How many tasks processing/ and done/ hold, per queue and per process, kept by the names that
change, so the dashboard's counts cost what changed since its last look, not what a deep queue
holds (a listing of 80,000 names takes tens of milliseconds on every refresh).

Only names are kept, never a record: a task file's name is its id, and a name in a directory is
one task there (a task left in two directories by an interrupted move counts in both until the
sweep removes the loser, as a listing of the directory counted it). Names come from the
ChangeLog's inotify events; without inotify, or after events were lost, from a listing of a
directory whose mtime moved.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from . import paths
from .inotify import ChangeLog, Subscription
from .paths import QueueDirs

COUNTED = ("processing", "done")
# A change in the same clock tick as a listing leaves the directory's mtime as it was, so an
# mtime this young is never trusted (as listing_index.py).
_RACY_NS = 100_000_000


class NameCount:
    """The task ids in one state directory of a queue."""

    def __init__(self, changes: ChangeLog | None, proc_path: str) -> None:
        self.ids: set[str] = set()
        self._sub: Subscription | None = changes.subscribe(proc_path) if changes else None
        self._mtime = -1
        self.listings = 0  # full listings made (the first one, and after lost events)

    def refresh(self, dir_fd: int) -> int:
        """The number of task files in the directory now."""
        sub = self._sub
        if sub is not None and sub.listening:
            overflowed, names = sub.drain()  # the first drain says overflowed: list it once
            if not overflowed:
                for name, present in names.items():
                    task_id = paths.task_id_of(name)
                    if task_id is not None:
                        (self.ids.add if present else self.ids.discard)(task_id)
                return len(self.ids)
        else:
            mtime = os.stat(dir_fd).st_mtime_ns
            if mtime == self._mtime:
                return len(self.ids)
            self._mtime = mtime if time.time_ns() - mtime > _RACY_NS else -1
        self._list(dir_fd)
        return len(self.ids)

    def _list(self, dir_fd: int) -> None:
        self.listings += 1
        self.ids = {i for name in os.listdir(dir_fd) if (i := paths.task_id_of(name))}

    def close(self) -> None:
        if self._sub is not None:
            self._sub.source.unsubscribe(self._sub)
            self._sub = None


class QueueCounts:
    """processing/ and done/ of one queue; call counts() with `lock` held."""

    def __init__(self, qd: QueueDirs, changes: ChangeLog | None) -> None:
        self.lock = threading.Lock()
        self.dirs = {d: NameCount(changes, qd.proc_path(d)) for d in COUNTED}

    def counts(self, qd: QueueDirs) -> dict[str, int]:
        return {d: self.dirs[d].refresh(qd.fd(d)) for d in COUNTED}

    def close(self) -> None:
        for count in self.dirs.values():
            count.close()


class DirCounts:
    """The counts of the queues this process counted most recently (each a set of ids and two
    inotify subscriptions; the dashboard counts every queue a user sees, hence a generous keep)."""

    def __init__(self, changes: Callable[[], ChangeLog | None], *, keep: int = 256) -> None:
        self._changes = changes
        self._keep = keep
        self._lock = threading.Lock()
        self._queues: OrderedDict[tuple[str, str], QueueCounts] = OrderedDict()

    def counts(self, qd: QueueDirs) -> dict[str, int]:
        """{"processing": n, "done": n} for a held queue."""
        counts = self._queues_of(qd)
        with counts.lock:
            return counts.counts(qd)

    def ids(self, qd: QueueDirs, directory: str) -> set[str]:
        """The task ids in one counted directory of a held queue now (a copy)."""
        counts = self._queues_of(qd)
        with counts.lock:
            return set(_refreshed(counts, qd, directory).ids)

    def count(self, qd: QueueDirs, directory: str) -> int:
        """The task files in one counted directory of a held queue now (that one refreshed)."""
        counts = self._queues_of(qd)
        with counts.lock:
            return len(_refreshed(counts, qd, directory).ids)

    def _queues_of(self, qd: QueueDirs) -> QueueCounts:
        key = (qd.host, qd.queue)
        with self._lock:
            counts = self._queues.get(key)
            if counts is None:
                counts = self._queues[key] = QueueCounts(qd, self._changes())
                while len(self._queues) > self._keep:
                    self._queues.popitem(last=False)[1].close()
            self._queues.move_to_end(key)
        return counts

    def drop(self, host: str, queue: str) -> None:
        """The queue was closed (its descriptors went): its counts go too."""
        with self._lock:
            counts = self._queues.pop((host, queue), None)
        if counts is not None:
            counts.close()

    def close(self) -> None:
        with self._lock:
            for counts in self._queues.values():
                counts.close()
            self._queues.clear()


def _refreshed(counts: QueueCounts, qd: QueueDirs, directory: str) -> NameCount:
    """One counted directory of a queue, brought up to date (call with counts.lock held)."""
    names = counts.dirs[directory]
    names.refresh(qd.fd(directory))
    return names
