"""A per-process index of claim candidates, so a claim never lists and parses every pending file.

It holds (priority, postedAt, seq, availableAt) per pending id, learned from inotify names (or,
without inotify, from a listing when the directory's mtime moves) and reads a record only for a
name it has not seen. It is a hint: the claim re-reads the record under the task's lock, and
entries whose rename fails are dropped lazily, so other processes posting and claiming keep it
correct.
"""

from __future__ import annotations

import heapq
import os
from typing import Any

import orjson

from . import files, inotify, paths
from .errors import CorruptRecord
from .inotify import ChangeLog, Subscription
from .pending_summary import PendingEntries
from .records import State, Task, parse_record


class PendingIndex:
    def __init__(self, dir_fd: int, proc_path: str, changes: ChangeLog) -> None:
        self._fd = dir_fd
        # id -> (-priority, postedAt, availableAt, retrying, seq): what the heaps are checked
        # against (seq last, so the waiting counts read entries as they always have)
        self.entries = PendingEntries()  # with the stats' counts kept (pending_summary.py)
        # (-priority, postedAt, seq, id): post order within a priority, a record without a seq
        # (0) first among its millisecond's, by id
        self._ready: list[tuple[int, int, int, str]] = []
        self._delayed: list[tuple[int, str]] = []  # (availableAt, id)
        self._taken: dict[str, Key] = {}  # ids a claim is trying now
        # pending ids waiting for other tasks (dependencies.py): never candidates; the inode
        # seen by the last listing (0: not listed yet), so a listing re-reads only a rewrite
        self._waiting: dict[str, int] = {}
        # ids this process wrote into pending/ since the last drain, with the key it noted: a
        # name whose one event since then is that write is known without reading it again
        self._own: dict[str, Key] = {}
        self._sub: Subscription | None = changes.subscribe(proc_path)
        self._mtime = -1
        # A name could not be read (out of descriptors, say): list the directory again at the
        # next refresh, since the name drained from inotify would otherwise be lost until the
        # task moves again.
        self._stale = False

    def refresh(self, *, exact: bool = False, read: bool = True) -> None:
        """Learn what changed in pending/. `exact`: even without inotify, where a directory's
        mtime may not move for a change made in the same clock tick as the last look. `read`
        False: from what the process's inotify queue held at its last read (the caller's own
        thread has just read it all)."""
        if self._sub is not None and self._sub.listening:
            overflowed, names = self._sub.drain(read=read)
            own, self._own = self._own, {}
            if not overflowed and not self._stale:
                for name, present in names.items():
                    task_id = paths.task_id_of(name)
                    if task_id is None:
                        continue
                    if (
                        present is True
                        and task_id in own
                        and self.entries.get(task_id) == own[task_id]
                    ):
                        continue  # our own write, and no other event since: add() has its key
                    if present:
                        self.learn(task_id)
                    elif (task_id in self.entries or task_id in self._waiting) and not self._exists(
                        task_id
                    ):
                        # Moved out or deleted. The check matters: a task this process put
                        # back (retry, requeue) is in the index already, and the old "moved out"
                        # event can arrive after that and before the "moved in" one.
                        self.entries.pop(task_id, None)
                        self._waiting.pop(task_id, None)
                return
        else:  # no inotify, or no more (the directory went, or this is a forked child)
            mtime = os.stat(self._fd).st_mtime_ns
            if mtime == self._mtime and not self._stale and not exact:
                return
            self._mtime = mtime
        self._own = {}  # the listing below reads only names the index does not hold
        self._rescan()

    def _rescan(self) -> None:
        self._stale = False  # learn() sets it again if a name cannot be read
        present = set()
        for entry in os.scandir(self._fd):
            task_id = paths.task_id_of(entry.name)
            if task_id is not None:
                present.add(task_id)
                if task_id not in self.entries and self._waiting.get(task_id) != entry.inode():
                    self.learn(task_id)
                    if task_id in self._waiting:
                        self._waiting[task_id] = entry.inode()
        for task_id in set(self.entries) - present:
            del self.entries[task_id]
        for task_id in set(self._waiting) - present:
            del self._waiting[task_id]

    def learn(self, task_id: str) -> None:
        """Index a pending name, or drop it if it is gone or corrupt (the sweep quarantines
        it). StorageUnavailable if it cannot be read now; the next refresh tries again."""
        try:
            data = files.read_at(self._fd, paths.task_file(task_id))
        except OSError as exc:
            if not files.gone_or_not_a_task_file(exc):
                self._stale = True
                raise files.unreadable(exc) from exc
            self.entries.pop(task_id, None)
            return
        try:
            # the record's checked fields, without building a Task: a first claim on a deep
            # queue reads every pending file, and the Task was most of the time per file
            values = parse_record(orjson.loads(data))
        except (ValueError, CorruptRecord):
            self.entries.pop(task_id, None)
            return
        if values["status"] is State.PENDING:
            if values.get("waiting_for"):
                self._wait(task_id)
            else:
                self._put(task_id, _key(values))

    def _exists(self, task_id: str) -> bool:
        try:
            os.stat(paths.task_file(task_id), dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def add(self, task: Task) -> None:
        """A task this process has just written into pending/ (its rename is done, so its
        event is queued already: the next drain finds it and need not read the file). A task
        waiting for others is set aside, never a candidate, and its next event is read."""
        if task.waiting_for:
            self._wait(task.id)
            return
        key = _key(vars(task))
        self._put(task.id, key)
        if self._sub is not None:
            if len(self._own) >= inotify.NAMES_HELD:  # never drained (no claim here): forget
                self._own = {}
            self._own[task.id] = key

    def _wait(self, task_id: str) -> None:
        self.entries.pop(task_id, None)
        self._waiting.setdefault(task_id, 0)

    def _put(self, task_id: str, key: Key) -> None:
        self._waiting.pop(task_id, None)
        if self.entries.get(task_id) == key:
            return
        self.entries[task_id] = key
        heapq.heappush(self._ready, _ready(task_id, key))

    def take(self, now: int) -> str | None:
        """Remove and return the best claimable id (priority, then oldest), or None."""
        while self._delayed and self._delayed[0][0] <= now:
            _, task_id = heapq.heappop(self._delayed)
            key = self.entries.get(task_id)
            if key is not None:
                heapq.heappush(self._ready, _ready(task_id, key))
        while self._ready:
            neg_priority, posted_at, seq, task_id = heapq.heappop(self._ready)
            key = self.entries.get(task_id)
            if key is None or (key[0], key[1], key[4]) != (neg_priority, posted_at, seq):
                continue  # a stale heap entry: the id left, or came back with new values
            if key[2] > now:
                heapq.heappush(self._delayed, (key[2], task_id))
                continue
            self._taken[task_id] = self.entries.pop(task_id)
            return task_id
        return None

    def count_before(self, mine: tuple[int, int, int, str], now: int, most: int) -> int:
        """How many claimable candidates a claim takes before the one whose heap entry would
        be `mine` (-priority, postedAt, seq, id), at most `most`: a walk down the ready heap
        that leaves out each subtree whose top is not before `mine` (a heap's descendants
        come after their parent), so it costs about what it counts, not the queue's depth;
        then the delayed candidates whose time has come (few: a claim moves them back)."""
        counted: set[str] = set()  # an id may sit in the heap twice with the same values
        heap, stack = self._ready, [0]
        while stack and len(counted) < most:
            i = stack.pop()
            if i >= len(heap) or heap[i] >= mine:
                continue
            neg_priority, posted_at, seq, task_id = heap[i]
            key = self.entries.get(task_id)
            if key is not None and key[2] <= now and (key[0], key[1], key[4]) == (
                neg_priority, posted_at, seq
            ):  # fmt: skip
                counted.add(task_id)
            stack += (2 * i + 1, 2 * i + 2)
        delayed, stack = self._delayed, [0]
        while stack:  # the same walk down the delayed heap: only subtrees whose time has come
            i = stack.pop()
            if i >= len(delayed) or delayed[i][0] > now:
                continue
            task_id = delayed[i][1]
            key = self.entries.get(task_id)
            if key is not None and key[2] <= now and _ready(task_id, key) < mine:
                counted.add(task_id)
            stack += (2 * i + 1, 2 * i + 2)
        return min(len(counted), most)

    def waiting_ids(self) -> frozenset[str]:
        """The pending ids that wait for other tasks (the sweep has nothing to do to them)."""
        return frozenset(self._waiting)

    def count(self) -> int:
        """Tasks in pending/: the candidates, and the ids a claim is trying now (their files
        stay in pending/ until its rename), and the waiting ones."""
        taken = sum(1 for i in self._taken if i not in self.entries)
        return len(self.entries) + taken + len(self._waiting)

    def give_back(self, task_id: str) -> None:
        """A taken id the claim could not settle (another process held it): still a candidate."""
        key = self._taken.pop(task_id, None)
        if key is not None and task_id not in self.entries:
            self.entries[task_id] = key
            heapq.heappush(self._ready, _ready(task_id, key))

    def forget(self, task_id: str) -> None:
        self._taken.pop(task_id, None)
        self.entries.pop(task_id, None)
        self._waiting.pop(task_id, None)

    def close(self) -> None:
        """Stop listening: the change log keeps no more names for this directory."""
        if self._sub is not None:
            self._sub.close()
            self._sub = None

    def next_due(self) -> int | None:
        """When the earliest delayed candidate becomes claimable (for waiting claims)."""
        return min((at for at, task_id in self._delayed if task_id in self.entries), default=None)


Key = tuple[int, int, int, bool, int]  # (-priority, postedAt, availableAt, retrying, seq)


def _key(fields: dict[str, Any]) -> Key:
    """A record's Key from its fields (the ext ones optional)."""
    available_at = fields.get("available_at", 0)
    retrying = fields["attempts"] > 0 and available_at > fields["updated_at"]
    return (-fields.get("priority", 0), fields["posted_at"], available_at, retrying,
            fields.get("seq", 0))  # fmt: skip


def _ready(task_id: str, key: Key) -> tuple[int, int, int, str]:
    return (key[0], key[1], key[4], task_id)
