"""One inotify watcher per process, shared by every waiting claim, waiter and pending index.

The kernel allows few inotify instances per user (128 here), so a process opens one, and one
daemon thread reads it: it hands the changed names to the subscribed indexes and wakes every
waiter. Without inotify, waiters poll cheaply and indexes fall back to directory mtimes.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import weakref

IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR = 0x4000, 0x8000, 0x01000000
_MASK = IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ONLYDIR
_HEADER = struct.Struct("iIII")
POLL_SECONDS = 0.05  # the fallback's polling interval


class Subscription:
    """The names changed in one watched directory since the index last drained them, each with
    whether its last event left it there (created, moved in) or took it away (deleted, moved out):
    a name taken away needs no read to know it is gone."""

    def __init__(self) -> None:
        self.names: dict[str, bool] = {}
        self.overflowed = True  # the first drain lists the whole directory
        self.lock = threading.Lock()

    def drain(self) -> tuple[bool, dict[str, bool]]:
        with self.lock:
            overflowed, names = self.overflowed, self.names
            self.overflowed, self.names = False, {}
        return overflowed, names


class Watcher:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.generation = 0
        self.cond = threading.Condition()
        self._subs: dict[int, weakref.WeakSet[Subscription]] = {}
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = (
            int(self._libc.inotify_init1(os.O_CLOEXEC))
            if hasattr(self._libc, "inotify_init1")
            else -1
        )
        self.available = self.fd >= 0
        if self.available:
            threading.Thread(target=self._run, name="taskhoster-inotify", daemon=True).start()

    def watch(self, dir_path: str) -> int | None:
        """Watch a directory (named by /proc/self/fd/N); returns the watch id, or None."""
        if not self.available:
            return None
        wd = int(self._libc.inotify_add_watch(self.fd, os.fsencode(dir_path), _MASK))
        return wd if wd >= 0 else None

    def subscribe(self, dir_path: str) -> Subscription | None:
        wd = self.watch(dir_path)
        if wd is None:
            return None
        sub = Subscription()
        with self.cond:
            self._subs.setdefault(wd, weakref.WeakSet()).add(sub)
        return sub

    def wait(self, generation: int, timeout: float) -> None:
        """Block until something changed after `generation` was read, or the timeout."""
        with self.cond:
            if self.available:
                self.cond.wait_for(lambda: self.generation != generation, timeout)
            else:
                self.cond.wait(min(timeout, POLL_SECONDS))

    def _run(self) -> None:
        while True:
            data = os.read(self.fd, 1 << 16)
            offset = 0
            with self.cond:
                while offset < len(data):
                    wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
                    raw = data[offset + _HEADER.size : offset + _HEADER.size + size]
                    offset += _HEADER.size + size
                    self._dispatch(wd, mask, raw.rstrip(b"\0").decode(errors="replace"))
                self.generation += 1
                self.cond.notify_all()

    def _dispatch(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            subs = [s for group in self._subs.values() for s in group]
        elif mask & IN_IGNORED:  # the directory is gone; its watch id may be reused
            subs = list(self._subs.pop(wd, ()))
        else:
            subs = list(self._subs.get(wd, ()))
        for sub in subs:
            with sub.lock:
                if mask & (IN_Q_OVERFLOW | IN_IGNORED):
                    sub.overflowed = True
                else:  # events come in order, so the last one says where the name is now
                    sub.names[name] = not mask & (IN_MOVED_FROM | IN_DELETE)


_watcher: Watcher | None = None
_watcher_lock = threading.Lock()


def watcher() -> Watcher:
    """This process's watcher (a forked child makes its own: threads do not survive fork)."""
    global _watcher
    with _watcher_lock:
        if _watcher is None or _watcher.pid != os.getpid():
            _watcher = Watcher()
        return _watcher
