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
from typing import NamedTuple

from . import paths, stamps
from .inotify import IN_DELETE, IN_MOVED_FROM, ChangeLog, Subscription, arrivals
from .paths import QueueDirs

COUNTED = ("processing", "done")
_JOURNAL_KEPT = 1024  # changes kept for readers of what changed (NameCount.changes_since)


class Since(NamedTuple):
    """A counted directory now, for a reader of what changed in it (DirCounts.since)."""

    total: int  # task files in the directory
    epoch: int
    end: int  # pass back as `seen`, with `epoch`, next time
    changes: list[tuple[str, bool]] | None  # (id, present), oldest first; None: see `ids`
    ids: set[str] | None  # every id now, when the changes were no longer kept
    read: bool  # the process's inotify queue was read for it (all the kernel had queued)


class NameCount:
    """The task ids in one state directory of a queue, and the latest of their changes (for a
    reader that keeps something per id, such as the flow gate's keys: it reads what changed
    since its last look, not the whole set)."""

    def __init__(self, changes: ChangeLog | None, proc_path: str) -> None:
        self.ids: set[str] = set()
        # names leaving, and task files arriving (by a rename, or a link where renameat2 is
        # missing): not a temp file's creation, one event less per record written there
        self._sub: Subscription | None = (
            changes.subscribe(proc_path, arrivals() | IN_MOVED_FROM | IN_DELETE)
            if changes
            else None
        )
        self._mtime = -1
        self.listings = 0  # full listings made (the first one, and after lost events)
        # (id, present) in the order applied; `journal_start` is the number of changes before
        # the first one kept. A listing empties it and moves `epoch`: a reader from before it
        # starts again from `ids`
        self.journal: list[tuple[str, bool]] = []
        self.journal_start = 0
        self.epoch = 0
        self.journaling = False  # kept only once a reader asked (the dashboard never does)

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
                        if self.journaling:
                            self.journal.append((task_id, bool(present)))
                if len(self.journal) > _JOURNAL_KEPT:
                    # readers that fell this far behind start again from `ids`
                    cut = len(self.journal) - _JOURNAL_KEPT // 2
                    del self.journal[:cut]
                    self.journal_start += cut
                return len(self.ids)
        else:
            mtime = os.stat(dir_fd).st_mtime_ns
            if mtime == self._mtime:
                return len(self.ids)
            self._mtime = mtime if time.time_ns() - mtime > stamps.RACY_NS else -1
        self._list(dir_fd)
        return len(self.ids)

    @property
    def listening(self) -> bool:
        """Whether a refresh reads the process's inotify queue (else it lists, or looks at
        the mtime)."""
        return self._sub is not None and self._sub.listening

    def changes_since(self, epoch: int, seen: int) -> list[tuple[str, bool]] | None:
        """The changes after the first `seen` ones of `epoch`, or None when they are no
        longer kept (read `ids` whole, then go on from `epoch` and `end`)."""
        if epoch != self.epoch or seen < self.journal_start:
            return None
        return self.journal[seen - self.journal_start :]

    @property
    def end(self) -> int:
        """The number of changes applied in this epoch."""
        return self.journal_start + len(self.journal)

    def _list(self, dir_fd: int) -> None:
        self.listings += 1
        self.epoch += 1
        self.journal, self.journal_start = [], 0
        self.ids = {i for name in os.listdir(dir_fd) if (i := paths.task_id_of(name))}

    def close(self) -> None:
        if self._sub is not None:
            self._sub.source.unsubscribe(self._sub)
            self._sub = None


class QueueCounts:
    """processing/ and done/ of one queue, each watched from its first count on (a worker's
    process counts processing/ for a limited queue's claims, and never done/, whose events
    would only cost it); call with `lock` held."""

    def __init__(self, qd: QueueDirs, changes: ChangeLog | None) -> None:
        self.lock = threading.Lock()
        self.dirs: dict[str, NameCount] = {}
        self._changes = changes

    def of(self, qd: QueueDirs, directory: str) -> NameCount:
        names = self.dirs.get(directory)
        if names is None:
            names = self.dirs[directory] = NameCount(self._changes, qd.proc_path(directory))
        return names

    def counts(self, qd: QueueDirs) -> dict[str, int]:
        return {d: self.of(qd, d).refresh(qd.fd(d)) for d in COUNTED}

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

    def since(self, qd: QueueDirs, directory: str, epoch: int, seen: int) -> Since:
        """One counted directory of a held queue now: its count, and what changed in it after
        a reader's `epoch` and `seen` (or, when those are no longer kept, all its ids)."""
        counts = self._queues_of(qd)
        with counts.lock:
            names = counts.of(qd, directory)
            names.journaling = True
            read = names.listening
            names.refresh(qd.fd(directory))
            changes = names.changes_since(epoch, seen)
            ids = set(names.ids) if changes is None else None
            return Since(len(names.ids), names.epoch, names.end, changes, ids, read)

    def count(self, qd: QueueDirs, directory: str) -> int:
        """The task files in one counted directory of a held queue now (that one refreshed)."""
        return self.counted(qd, directory)[0]

    def counted(self, qd: QueueDirs, directory: str) -> tuple[int, bool]:
        """count(), and whether the process's inotify queue was read for it."""
        counts = self._queues_of(qd)
        with counts.lock:
            names = counts.of(qd, directory)
            read = names.listening
            names.refresh(qd.fd(directory))
            return len(names.ids), read

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
    names = counts.of(qd, directory)
    names.refresh(qd.fd(directory))
    return names
