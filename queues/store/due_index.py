"""When each thing of a queue next falls due for the sweep, kept per process and fed by inotify, so
that a pass of a long-lived sweep reads only what changed or fell due, not what the queue holds.

The sweep's first pass of a queue in a process lists and judges everything (sweep.py) and notes
here, for every task copy, temp file and idempotency key, the time its next rule can fire
(rules.next_due: a queue timeout, a lease's end, a retention's end; a temp's or a key's age past
sweep.STALE_TEMP_MS). From then on the queue's four watched directories (the state directories
and keys/) say by name what changed, whoever changed it (this process, another, an operator's
editor: renames in and out, creates, deletes, writes and attribute changes in place), and a pass
looks at those names and at the ones whose time came, nothing else.

Names are all that is trusted: an event on a name means "look at the file under it", so a file
that comes back under a name with a reused inode (spare inodes, RENAME_EXCHANGE) is looked at
like any other. The index asks for a whole pass again (`follow` answers None) when events were
lost (IN_Q_OVERFLOW, or a directory's names piling past inotify.NAMES_HELD between two passes),
when a directory stopped being watched, in a forked child, without inotify, and when the queue's
settings changed (every time kept was counted from them).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable

from . import paths
from .inotify import ENTRIES, ChangeLog, Subscription
from .paths import QueueDirs
from .per_queue import PerQueue
from .settings import QueueSettings

IN_ATTRIB, IN_CLOSE_WRITE = 0x4, 0x8
# a name entering or leaving, and a file changed in place (written by hand, touched, chmodded)
WATCHED = ENTRIES | 0x2 | IN_ATTRIB | IN_CLOSE_WRITE
DIRECTORIES = (*paths.STATE_DIRS, paths.KEYS_DIR)
TASK, TEMP, KEY = "task", "temp", "key"
Item = tuple[str, str, str]  # (kind, directory, name): a task id, a temp's or a key's file name


class DueIndex:
    """One queue's due times and the subscriptions that say what changed; use with `lock`."""

    def __init__(self, qd: QueueDirs, changes: ChangeLog | None) -> None:
        self.lock = threading.Lock()  # one pass of the queue at a time in this process
        self._subs: dict[str, Subscription | None] = {
            d: changes.subscribe(qd.proc_path(d), WATCHED) if changes is not None else None
            for d in DIRECTORIES
        }
        self.settings: QueueSettings | None = None  # those of the last whole pass
        self._due: dict[Item, int] = {}
        self._heap: list[tuple[int, Item]] = []
        self.key_of_task: dict[str, str] = {}  # a keyed task's id -> its key's file name
        self.whole_passes = 0  # passes that listed everything (the first, and after lost events)

    @property
    def listening(self) -> bool:
        return all(sub is not None and sub.listening for sub in self._subs.values())

    def follow(self, settings: QueueSettings) -> dict[str, dict[str, bool | int]] | None:
        """The names changed in each directory since the last pass (True or AGAIN: there after
        its events, False: gone), or None when the pass must list everything: call whole()
        then, before listing. Every event queued up to now is consumed, unless nothing is heard
        any more (no inotify, a directory gone, a forked child's inherited instance)."""
        if not self.listening:  # a forked child must not read its parent's events away
            return None
        changed: dict[str, dict[str, bool | int]] = {}
        lost = self.settings != settings
        for number, (directory, sub) in enumerate(self._subs.items()):
            if sub is None:
                continue
            overflowed, names = sub.drain(read=number == 0)  # one read of the kernel's queue
            lost = lost or overflowed
            changed[directory] = names
        return None if lost else changed

    def whole(self, settings: QueueSettings) -> None:
        """A pass that lists everything starts: what was kept is forgotten, and noted again."""
        self.settings = settings
        self._due.clear()
        self._heap = []
        self.key_of_task.clear()
        self.whole_passes += 1

    def lost(self) -> None:
        """A pass ended half-way (an error it did not note): the next one lists everything."""
        self.settings = None

    def at(self, item: Item, due: int | None) -> None:
        """Look at `item` again at `due` (ms), or never (None) unless it changes."""
        if due is None:
            self._due.pop(item, None)
            return
        if self._due.get(item) == due:
            return
        self._due[item] = due
        heapq.heappush(self._heap, (due, item))

    def forget(self, item: Item) -> None:
        self._due.pop(item, None)

    def fallen_due(self, now: int) -> list[Item]:
        """The items whose time came by `now`, each once, taken out of the index (the pass
        that looks at them notes their next time)."""
        found = []
        while self._heap and self._heap[0][0] <= now:
            due, item = heapq.heappop(self._heap)
            if self._due.get(item) == due:
                del self._due[item]
                found.append(item)
        if len(self._heap) > 2 * len(self._due) + 1024:  # stale entries of items seen again
            self._heap = [(due, item) for item, due in self._due.items()]
            heapq.heapify(self._heap)
        return found

    def kept(self) -> int:
        return len(self._due)

    def close(self) -> None:
        for sub in self._subs.values():
            if sub is not None:
                sub.close()
        self._subs = dict.fromkeys(DIRECTORIES)


class DueIndexes(PerQueue[DueIndex]):
    """The due indexes of the queues this process swept most recently (a sweep loop sweeps every
    queue; each index holds four inotify watches and about 200 bytes a task)."""

    def __init__(self, changes: Callable[[], ChangeLog | None], *, keep: int = 1024) -> None:
        super().__init__(DueIndex, changes, keep=keep)
