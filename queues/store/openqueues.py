"""The queues a process keeps open: each one's directory descriptors and pending index.

A long-lived process touches many queues, six descriptors each (and an inotify watch once a
claim has indexed it), so only the `limit` most recently used stay open. A queue is held while a
verb uses it (`hold`, a context manager), and only a queue nobody holds is ever closed: closing
a descriptor under a claim in progress, a waiting read or an index rescan would answer EBADF,
or worse, once the number is reused by another open, point that operation at the wrong
directory. A closed queue's index goes with it and is rebuilt (from a listing) on next use.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from . import paths
from .files import Durable
from .index import PendingIndex
from .inotify import changes
from .paths import QueueDirs


class _Open:
    __slots__ = ("dirs", "index")

    def __init__(self, dirs: QueueDirs) -> None:
        self.dirs = dirs
        self.index: PendingIndex | None = None


class OpenQueues:
    """Every method is called with `lock` held, except `hold`, which takes it."""

    def __init__(
        self,
        root_fd: int,
        *,
        limit: int,
        fsync: Durable,
        lock: AbstractContextManager[Any],
        on_close: Callable[[str, str], None] = lambda host, queue: None,
    ) -> None:
        self.root_fd, self.limit, self.fsync, self.lock = root_fd, max(1, limit), fsync, lock
        self._on_close = on_close  # what else goes with a closed queue (its listing index)
        self._open: OrderedDict[tuple[str, str], _Open] = OrderedDict()  # least recent first

    @contextmanager
    def hold(self, host: str, queue: str, *, create: bool) -> Iterator[QueueDirs]:
        """The queue's directories, open for as long as the block runs."""
        entry = self._acquire((paths.validate_host(host), paths.validate_queue(queue)), create)
        try:
            yield entry.dirs
        finally:
            with self.lock:
                entry.dirs.users -= 1
                if len(self._open) > self.limit:
                    self._trim()

    def _acquire(self, key: tuple[str, str], create: bool) -> _Open:
        with self.lock:
            entry = self._open.get(key)
            if entry is not None:
                entry.dirs.users += 1
                self._open.move_to_end(key)
                return entry
        # Opened without the lock: a new queue's mkdir and fsyncs must not hold up every verb.
        opened = QueueDirs(self.root_fd, *key, create=create, fsync=self.fsync)
        with self.lock:
            entry = self._open.get(key)
            if entry is None:  # else another thread opened it meanwhile: use theirs
                entry = self._open[key] = _Open(opened)
            entry.dirs.users += 1
            self._open.move_to_end(key)
            if len(self._open) > self.limit:
                self._trim()
        if entry.dirs is not opened:
            opened.close()
        return entry

    def _trim(self) -> None:
        """Close the least recently used queues nobody holds, down to the limit (held ones
        wait: they are closed when released, if the cache is still over its limit then)."""
        for key in [k for k, e in self._open.items() if e.dirs.users == 0]:
            if len(self._open) <= self.limit:
                return
            self._close(self._open.pop(key))
            self._on_close(*key)

    def index(self, qd: QueueDirs) -> PendingIndex:
        """The queue's pending index (made on first use), for a holder of `qd`."""
        entry = self._open.get((qd.host, qd.queue))
        if entry is None or entry.dirs is not qd or qd.users <= 0:
            raise RuntimeError(paths.used_outside_hold(qd))
        if entry.index is None:
            entry.index = PendingIndex(qd.fd("pending"), qd.proc_path("pending"), changes())
        return entry.index

    def known_index(self, qd: QueueDirs) -> PendingIndex | None:
        """The queue's index if one was made, else None (our own writes need not make one)."""
        entry = self._open.get((qd.host, qd.queue))
        return entry.index if entry is not None and entry.dirs is qd else None

    def keys(self) -> list[tuple[str, str]]:
        return list(self._open)

    def close(self) -> None:
        while self._open:
            key, entry = self._open.popitem(last=False)
            self._close(entry)
            self._on_close(*key)

    @staticmethod
    def _close(entry: _Open) -> None:
        if entry.index is not None:
            entry.index.close()  # its inotify watch goes, so the change log stops collecting
        entry.dirs.close()
