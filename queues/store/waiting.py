"""One inotify instance and one reader thread per process, shared by everything that waits in it.

The kernel allows few inotify instances per user (128 here), so a process opens one, and one
daemon thread reads it: waiting claims, waiting reads, the pending indexes, the monitor's event
streams and the Task Logs follower all go through it. Each caller names the directories it cares
about and the events it needs, and gets its own Channel, whose generation moves only on those: a
waiting claim on one queue sleeps through posts to other queues and through every event-log
append, while an event stream wakes on each append. Without inotify (or past the per-user watch
limit), waiters poll cheaply and indexes fall back to directory mtimes.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import TypeVar

IN_MODIFY, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x2, 0x40, 0x80, 0x100, 0x200
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR, IN_MASK_ADD = 0x4000, 0x8000, 0x01000000, 0x20000000
ENTRIES = IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE  # names entering and leaving
APPENDS = IN_MODIFY | IN_MOVED_TO | IN_CREATE  # the event log: lines appended, new day-files
ARRIVALS = IN_MOVED_TO | IN_CREATE  # names entering a directory (a waiting claim needs no more)
_HEADER = struct.Struct("iIII")
POLL_SECONDS = 0.05  # the fallback's polling interval


class Channel:
    """Wakes its waiters when an event in its mask happens in one of its directories.

    Channels share the watcher's lock but each has its own condition, so the reader thread
    notifies only the channels an event is for: other waiters do not even wake to re-check.
    """

    def __init__(
        self,
        lock: threading.Lock,
        mask: int,
        *,
        watched: bool,
        wanted: Callable[[str], bool] | None = None,
    ) -> None:
        self.mask = mask
        self.wanted = wanted  # None: every name; else only names it accepts wake the channel
        self.generation = 0
        self.pid = os.getpid()
        self.watched = watched  # False: no inotify behind it (now or any more), so waiters poll
        self.cond = threading.Condition(lock)

    @property
    def listening(self) -> bool:
        """Whether events still arrive (a forked child inherits no reader thread)."""
        return self.watched and self.pid == os.getpid()

    def wait(self, generation: int, timeout: float, *, poll: float = POLL_SECONDS) -> None:
        """Block until an event came after `generation` was read, or the timeout; without
        inotify, sleep at most `poll` (the caller looks again, which is all an event would do)."""
        with self.cond:
            if self.listening:
                self.cond.wait_for(lambda: self.generation != generation, timeout)
            else:
                self.cond.wait(max(0.0, min(timeout, poll)))

    def event(self, mask: int, name: str) -> None:
        """One event for this channel; the reader thread calls it with the lock held."""
        if mask & IN_IGNORED:  # a directory is gone: no more events, so poll from now on
            self.watched = False
        self.generation += 1
        self.cond.notify_all()


class Subscription(Channel):
    """A channel on one directory that also keeps the names changed since the last drain, each
    with whether its last event left it there (created, moved in) or took it away (deleted, moved
    out): a name taken away needs no read to know it is gone (the pending index)."""

    def __init__(self, lock: threading.Lock, *, watched: bool) -> None:
        super().__init__(lock, ENTRIES, watched=watched)
        self.names: dict[str, bool] = {}
        self.overflowed = True  # the first drain lists the whole directory

    def event(self, mask: int, name: str) -> None:
        if mask & (IN_Q_OVERFLOW | IN_IGNORED):
            self.overflowed = True
        else:  # events come in order, so the last one says where the name is now
            self.names[name] = not mask & (IN_MOVED_FROM | IN_DELETE)
        super().event(mask, name)

    def drain(self) -> tuple[bool, dict[str, bool]]:
        with self.cond:
            overflowed, names = self.overflowed, self.names
            self.overflowed, self.names = False, {}
        return overflowed, names


_C = TypeVar("_C", bound=Channel)


class Watcher:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self._channels: dict[int, weakref.WeakSet[Channel]] = {}  # watch id -> its channels
        self._libc = ctypes.CDLL(None, use_errno=True)
        init = getattr(self._libc, "inotify_init1", None)
        self.fd = int(init(os.O_CLOEXEC)) if init is not None else -1
        self.available = self.fd >= 0
        if self.available:
            threading.Thread(target=self._run, name="taskhoster-inotify", daemon=True).start()

    def channel(
        self, dir_paths: Iterable[str], mask: int, *, wanted: Callable[[str], bool] | None = None
    ) -> Channel:
        """A channel woken by `mask` events in any of the directories (named by path, or by
        /proc/self/fd/N); it polls if any of them cannot be watched.

        `wanted`: only events on names it accepts wake the channel (a waiting read wakes for
        its own task's file, not for every task of the queue); a lost-events overflow and a
        removed directory still wake it."""
        channel = Channel(self.lock, mask, watched=self.available, wanted=wanted)
        return self._register(channel, dir_paths)

    def subscribe(self, dir_path: str) -> Subscription | None:
        """The names changing in one directory, or None without inotify (list it instead)."""
        sub = self._register(Subscription(self.lock, watched=self.available), [dir_path])
        return sub if sub.watched else None

    def _register(self, channel: _C, dir_paths: Iterable[str]) -> _C:
        if not self.available:
            return channel
        # Under the lock, so the reader cannot hand out an event (IN_IGNORED above all) for a
        # watch before the channel is in its set.
        with self.lock:
            for dir_path in dir_paths:
                # IN_MASK_ADD: the kernel keeps one watch per directory and would otherwise
                # replace another caller's mask with ours (the union is what both need).
                mask = channel.mask | IN_ONLYDIR | IN_MASK_ADD
                wd = int(self._libc.inotify_add_watch(self.fd, os.fsencode(dir_path), mask))
                if wd < 0:  # not a directory any more, or the watch limit: nothing is lost, late
                    channel.watched = False
                    continue
                self._channels.setdefault(wd, weakref.WeakSet()).add(channel)
        return channel

    def _run(self) -> None:
        while True:
            data = os.read(self.fd, 1 << 16)
            offset = 0
            with self.lock:
                while offset < len(data):
                    wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
                    raw = data[offset + _HEADER.size : offset + _HEADER.size + size]
                    offset += _HEADER.size + size
                    self._dispatch(wd, mask, raw.rstrip(b"\0").decode(errors="replace"))

    def _dispatch(self, wd: int, mask: int, name: str) -> None:
        """Hand one event to the channels it is for; call with the lock held."""
        if mask & IN_Q_OVERFLOW:  # events were lost: wake everyone, every index relists
            targets = [c for group in self._channels.values() for c in group]
        elif mask & IN_IGNORED:  # the directory is gone; its watch id may be reused
            targets = list(self._channels.pop(wd, ()))
        else:  # the kernel delivers the union of masks; each channel takes only its own
            targets = [
                c
                for c in self._channels.get(wd, ())
                if c.mask & mask and (c.wanted is None or c.wanted(name))
            ]
        for channel in targets:
            channel.event(mask, name)


_watcher: Watcher | None = None
_watcher_lock = threading.Lock()


def watcher() -> Watcher:
    """This process's watcher (a forked child makes its own: threads do not survive fork)."""
    global _watcher
    with _watcher_lock:
        if _watcher is None or _watcher.pid != os.getpid():
            if _watcher is not None and _watcher.available:
                _close_inherited(_watcher.fd)
            _watcher = Watcher()
        return _watcher


def _close_inherited(fd: int) -> None:
    """Close the parent's instance, inherited by a forked child without its reader thread: it
    would only count against the per-user limit (the parent keeps its own). Checked first, in
    case the child closed its descriptors and the number now names something else."""
    try:
        if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
            os.close(fd)
    except OSError:
        pass
