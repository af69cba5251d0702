"""Every task's listing key, per queue and per process, so a page of a listing reads only its own
records.

For each task file in a queue's three state directories the index holds what ordering, filtering
and counting need: postedAt, status, postedBy, rev, the directory, and a stamp of the file it
read. It reads a record only to learn a name it has not seen, or one whose file changed: names
come from the ChangeLog's inotify events or, without inotify (or after events were lost), from a
listing of a directory whose mtime moved, where a file whose stamp differs was rewritten. A task
found in two directories (an interrupted move) counts once, as the copy copies.py would choose.

A page is chosen from the index and then only its records are read: they are the truth. One that
disagrees with its entry (moved, rewritten or removed since the index looked) is learned again
from all three directories and the page is chosen again, so a page is refilled, not left short;
a task that keeps moving through every attempt is left out of that one answer.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator
from stat import S_ISREG
from typing import NamedTuple

import orjson

from . import copies, files, paths, stamps
from .errors import CorruptRecord
from .inotify import ChangeLog, Subscription
from .paths import QueueDirs
from .per_queue import PerQueue
from .records import State, Task, parse_record
from .results import ANY, TaskPage, _Any

# Directory precedence on equal revs, the same order copies.copies() sorts by.
_PRECEDENCE = copies.PRECEDENCE
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a planted FIFO never blocks
_FEW = 64  # up to this many changes to one order go in one by one; more re-sort it once
_ATTEMPTS = 3  # choices of one page before a task that keeps moving is left out of it


class Entry(NamedTuple):
    """One copy of a task as the index knows it."""

    posted_at: int
    seq: int  # the post sequence (0 for a record from before it was kept)
    status: State
    posted_by: str | None
    rev: int
    directory: str
    stamp: int  # of the file it was read from; see stamps.py


def _rank(entry: Entry) -> tuple[int, int]:
    return entry.rev, _PRECEDENCE[entry.directory]


PostedBy = str | _Any | None
Filter = tuple[State | None, PostedBy]  # what a listing asks for: (status, postedBy)
OrderKey = tuple[int, int, str]  # (postedAt, seq, id): post order


def _filters(entry: Entry) -> tuple[Filter, ...]:
    """Every listing the task is in: all, its status, its poster's, its poster's in its status."""
    return (
        (None, ANY),
        (entry.status, ANY),
        (None, entry.posted_by),
        (entry.status, entry.posted_by),
    )


class ListingIndex:
    """The listing keys of one queue. Call refresh() and select() with `lock` held."""

    def __init__(self, qd: QueueDirs, changes: ChangeLog | None) -> None:
        self.lock = threading.Lock()
        self.tasks: dict[str, Entry] = {}  # id -> its winning copy
        self._others: dict[tuple[str, str], Entry] = {}  # (directory, id) -> a losing copy
        self._unreadable: dict[tuple[str, str], int] = {}  # (directory, id) -> stamp
        # Each listing's tasks, oldest first, so any page of it is a slice and its count a
        # length; the keys are shared by the lists a task is in (see _filters).
        self._orders: dict[Filter, list[OrderKey]] = {}
        self._added: dict[Filter, set[OrderKey]] = {}  # changes not in _orders yet
        self._removed: dict[Filter, set[OrderKey]] = {}
        self._mtimes = dict.fromkeys(paths.STATE_DIRS, -1)
        self._subs: dict[str, Subscription | None] = {
            d: changes.subscribe(qd.proc_path(d)) if changes is not None else None
            for d in paths.STATE_DIRS
        }
        self.records_learned = 0  # records read to learn entries (a cold index reads them all)
        self.records_paged = 0  # records read for pages

    def close(self) -> None:
        for sub in self._subs.values():
            if sub is not None:
                sub.source.unsubscribe(sub)
        self._subs = dict.fromkeys(paths.STATE_DIRS)

    # -- keeping it fresh -------------------------------------------------------------------

    def refresh(self, qd: QueueDirs) -> None:
        for directory in paths.STATE_DIRS:
            self._refresh(qd, directory)
        self._settle_order()

    def _refresh(self, qd: QueueDirs, directory: str) -> None:
        sub = self._subs[directory]
        if sub is not None and sub.listening:
            overflowed, names = sub.drain()
            if not overflowed:
                for name, present in names.items():
                    task_id = paths.task_id_of(name)
                    if task_id is None:
                        continue
                    if present:  # arrived or rewritten: its record says which
                        self._learn(qd, directory, task_id)
                    else:  # the last event took it away, and events come in order
                        self._place(directory, task_id, None)
                return
        else:
            mtime = os.stat(qd.fd(directory)).st_mtime_ns
            if mtime == self._mtimes[directory]:
                return
            self._mtimes[directory] = mtime if time.time_ns() - mtime > stamps.RACY_NS else -1
        self._rescan(qd, directory)

    def _rescan(self, qd: QueueDirs, directory: str) -> None:
        """List the directory: learn new and rewritten files, forget gone ones."""
        present = set()
        with os.scandir(qd.fd(directory)) as listing:
            for item in listing:
                task_id = paths.task_id_of(item.name)
                if task_id is None:
                    continue
                present.add(task_id)
                known = self._stamp_of(directory, task_id)
                if known is None:
                    self._learn(qd, directory, task_id)
                    continue
                try:
                    stamp = stamps.stamp(item.stat(follow_symlinks=False))
                except FileNotFoundError:
                    stamp = -1  # gone since the listing: the read says so
                if known == -1 or stamp != known:
                    self._learn(qd, directory, task_id)
        for task_id in [i for i in self._ids_in(directory) if i not in present]:
            self._place(directory, task_id, None)

    def _stamp_of(self, directory: str, task_id: str) -> int | None:
        entry = self.tasks.get(task_id)
        if entry is None or entry.directory != directory:
            entry = self._others.get((directory, task_id))
        if entry is not None:
            return entry.stamp
        return self._unreadable.get((directory, task_id))

    def _ids_in(self, directory: str) -> Iterator[str]:
        yield from (i for i, e in self.tasks.items() if e.directory == directory)
        yield from (i for d, i in self._others if d == directory)
        yield from (i for d, i in self._unreadable if d == directory)

    def _learn(self, qd: QueueDirs, directory: str, task_id: str) -> None:
        """Read one file and index its copy; a gone file is forgotten, a bad one skipped (as
        the listing always has: the sweep quarantines it)."""
        try:
            fd = os.open(paths.task_file(task_id), _READ, dir_fd=qd.fd(directory))
        except FileNotFoundError:
            self._place(directory, task_id, None)
            return
        except OSError:  # a symlink (ELOOP) or unreadable: corrupt, and tried again next time
            self._place(directory, task_id, None)
            self._unreadable[(directory, task_id)] = -1
            return
        stamp = -1
        try:
            stat = os.fstat(fd)
            stamp = stamps.stamp(stat)
            if not S_ISREG(stat.st_mode):
                raise files.NotRegularFile(task_id)  # a FIFO, a device: never read from
            data = os.read(fd, stat.st_size + 1)  # one read: a record is replaced, never grown
            if len(data) > stat.st_size:
                data += files.read_fd(fd)
        except OSError:  # a FIFO or a device: corrupt
            data = b""
        finally:
            os.close(fd)
        self.records_learned += 1
        try:
            values = parse_record(orjson.loads(data))
        except (ValueError, CorruptRecord):  # orjson's JSONDecodeError is a ValueError
            values = None
        if values is None or (values["id"], values["host"], values["queue"]) != (
            task_id,
            qd.host,
            qd.queue,
        ):  # not a record, or not this place's (the sweep quarantines it)
            self._place(directory, task_id, None)
            self._unreadable[(directory, task_id)] = stamp
            return
        posted_by = values["posted_by"]
        entry = Entry(
            posted_at=values["posted_at"],
            seq=values.get("seq", 0),
            status=values["status"],
            posted_by=sys.intern(posted_by) if posted_by is not None else None,
            rev=values.get("rev", 0),
            directory=directory,
            stamp=stamp,
        )
        self._place(directory, task_id, entry)

    def relearn(self, qd: QueueDirs, task_id: str) -> None:
        """Read every copy of one task again (a page found its entry stale)."""
        for directory in paths.STATE_DIRS:
            self._learn(qd, directory, task_id)
        self._settle_order()

    def _place(self, directory: str, task_id: str, entry: Entry | None) -> None:
        """Set (None: remove) one directory's copy of a task, then let the best copy win."""
        self._unreadable.pop((directory, task_id), None)
        old = self.tasks.get(task_id)
        if not self._others and (old is None or old.directory == directory):
            if entry is not None or old is not None:  # the usual case: one copy, one directory
                self._win(task_id, old, entry)
            return
        found = {} if old is None else {old.directory: old}
        for d in paths.STATE_DIRS:
            other = self._others.pop((d, task_id), None)
            if other is not None:
                found[d] = other
        if entry is None:
            found.pop(directory, None)
        else:
            found[directory] = entry
        best = max(found.values(), key=_rank, default=None)
        for d, copy in found.items():
            if copy is not best:
                self._others[(d, task_id)] = copy
        self._win(task_id, old, best)

    def _win(self, task_id: str, old: Entry | None, new: Entry | None) -> None:
        """Make `new` the task's winning copy instead of `old`: its listings follow."""
        if new is old:
            return
        if new is None:
            del self.tasks[task_id]
        else:
            self.tasks[task_id] = new
        before, after = _listed(task_id, old), _listed(task_id, new)
        for listing, key in before - after:
            _change(listing, key, self._added, self._removed)
        for listing, key in after - before:
            _change(listing, key, self._removed, self._added)

    def _settle_order(self) -> None:
        for listing in self._removed.keys() | self._added.keys():
            order = self._orders.get(listing, [])
            removed = self._removed.get(listing, ())
            added = self._added.get(listing, ())
            if len(removed) <= _FEW:
                for key in removed:
                    at = bisect_left(order, key)
                    if at < len(order) and order[at] == key:
                        del order[at]
            else:
                order = [key for key in order if key not in removed]
            if len(added) <= _FEW:
                for key in added:
                    insort(order, key)
            else:
                order.extend(added)
                order.sort()  # two runs, mostly: the order so far and what was added
            if order:
                self._orders[listing] = order
            else:
                self._orders.pop(listing, None)
        self._added, self._removed = {}, {}

    # -- pages ------------------------------------------------------------------------------

    def order(self, status: State | None) -> list[OrderKey]:
        """Every task of a status (None: all), oldest first, as a live list: read it with
        `lock` held, after refresh(), and copy what is kept past the lock."""
        return self._orders.get((status, ANY), [])

    def counts(self) -> dict[State, int]:
        """How many tasks each status holds, from the lists alone (call as order())."""
        return {state: len(self._orders.get((state, ANY), ())) for state in State}

    def select(
        self, status: State | None, posted_by: PostedBy, limit: int, offset: int
    ) -> tuple[int, list[tuple[str, Entry]]]:
        """The count and a page's (id, entry) pairs, newest first."""
        anyone = isinstance(posted_by, _Any)
        order = self._orders.get((status, ANY if anyone else posted_by), [])
        end = max(len(order) - offset, 0)
        keys = order[max(end - limit, 0) : end]
        return len(order), [(task_id, self.tasks[task_id]) for *_, task_id in reversed(keys)]

    def page(
        self, qd: QueueDirs, status: State | None, posted_by: PostedBy, limit: int, offset: int
    ) -> TaskPage:
        limit, offset = max(limit, 0), max(offset, 0)
        read: dict[str, Task] = {}
        for _ in range(_ATTEMPTS):
            with self.lock:
                self.refresh(qd)
                count, chosen = self.select(status, posted_by, limit, offset)
            stale = []
            for task_id, entry in chosen:
                known = read.get(task_id)
                if known is not None and known.status is entry.status:
                    continue
                task = self._read(qd, entry.directory, task_id)
                if task is None or task.status is not entry.status:
                    stale.append(task_id)
                else:
                    read[task_id] = task
            if not stale:
                break
            with self.lock:
                for task_id in stale:
                    self.relearn(qd, task_id)
        return TaskPage(count=count, tasks=[read[i] for i, _ in chosen if i in read])

    def _read(self, qd: QueueDirs, directory: str, task_id: str) -> Task | None:
        self.records_paged += 1
        try:
            task = copies.read_copy(qd, directory, task_id)
        except CorruptRecord:
            return None
        return task if task is not None and copies.belongs(qd, task_id, task) else None


def _listed(task_id: str, entry: Entry | None) -> set[tuple[Filter, OrderKey]]:
    if entry is None:
        return set()
    key = (entry.posted_at, entry.seq, task_id)  # one tuple, shared by every list it is in
    return {(listing, key) for listing in _filters(entry)}


def _change(
    listing: Filter,
    key: OrderKey,
    undo: dict[Filter, set[OrderKey]],
    do: dict[Filter, set[OrderKey]],
) -> None:
    """Note one key added to (or removed from) a listing, cancelling the opposite change."""
    pending = undo.get(listing)
    if pending is not None and key in pending:
        pending.discard(key)
    else:
        do.setdefault(listing, set()).add(key)


class ListingIndexes(PerQueue[ListingIndex]):
    """The listing indexes of the queues this process listed most recently (each holds about
    a few hundred bytes per task and three inotify subscriptions, so only `keep` are kept)."""

    def __init__(self, changes: Callable[[], ChangeLog | None], *, keep: int = 16) -> None:
        super().__init__(ListingIndex, changes, keep=keep)

    def page(
        self,
        qd: QueueDirs,
        *,
        status: State | None,
        posted_by: PostedBy,
        limit: int,
        offset: int,
    ) -> TaskPage:
        return self.of(qd).page(qd, status, posted_by, limit, offset)
