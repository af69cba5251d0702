"""inotify in a process: one threaded watcher for everything that waits, one read in place for
the claim indexes, and one for the sweep's due indexes.

The kernel allows few inotify instances per user (128 here), so a process opens two at most,
and a third if it sweeps (`sweep_changes()`, for due_index.py):

- The watcher (`watcher()`): one instance and one daemon reader thread, shared by waiting
  claims, waiting reads, the monitor's event streams and the Task Logs follower. Each caller
  names the directories and events it needs and gets its own Channel, whose generation moves
  only on those. A directory is watched only while a channel on it is open, and only for the
  events its channels asked for, because every event the thread reads costs the process's
  request threads a hand-over of the GIL (measured: a create and a rename in a watched
  directory took 2.5x as long). A waiting claim therefore asks for names moved in, which a
  task file always is, not for the temp files created beside them.
- The change log (`changes()`): one non-blocking instance with no thread. The pending indexes
  subscribe to their directories on it and read what queued up when they are next used, so
  posts and claims in other processes cost this process nothing until it claims.

Without inotify (or past the per-user watch limit), waiters poll cheaply and indexes fall back
to directory mtimes.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator

from . import files

IN_MODIFY, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x2, 0x40, 0x80, 0x100, 0x200
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR, IN_MASK_ADD = 0x4000, 0x8000, 0x01000000, 0x20000000
IN_NONBLOCK = os.O_NONBLOCK
ENTRIES = IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE  # names entering and leaving
APPENDS = IN_MODIFY | IN_MOVED_TO | IN_CREATE  # the event log: lines appended, new day-files
# A task file only ever arrives by a rename (queues.store.files: temp-then-rename, and the claim's
# and a keyed post's no-replace renames), so names arriving are renames in; see arrivals().
ARRIVALS = IN_MOVED_TO
_HEADER = struct.Struct("iIII")
_READ_SIZE = 1 << 16
_LARGEST_EVENT = _HEADER.size + 256  # a header and the longest name (NAME_MAX), padded
POLL_SECONDS = 0.05  # the fallback's polling interval
NAMES_HELD = 10_000  # names a subscription holds between drains before it asks for a listing
# A name's value in a drain: False, gone; True, arrived by its one event since the last drain
# (the pending index then knows a name this process itself just wrote, without reading it);
# AGAIN, there after more events than that (another writer may have changed it meanwhile).
AGAIN = 2

# this process's id, asked once and again in a forked child: each index refresh and waiting
# read asks whether it is still the process that made its instance, and getpid() is a system
# call each time
_pid = os.getpid()


def _new_pid_in_child() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_new_pid_in_child)


def arrivals() -> int:
    """The events of a task file arriving: renames in, and creates where the file system has no
    RENAME_NOREPLACE and names are made by link() (creates of temp files would otherwise wake
    the reader thread for nothing)."""
    return ARRIVALS | (IN_CREATE if files.creates_by_link() else 0)


class _Inotify:
    """One inotify instance: watches and raw event reads, nothing else."""

    def __init__(self, flags: int) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        init = getattr(self._libc, "inotify_init1", None)
        self.fd = int(init(os.O_CLOEXEC | flags)) if init is not None else -1
        self.available = self.fd >= 0

    def add_watch(self, dir_path: str, mask: int) -> int:
        """The watch id, or -1 (not a directory any more, or the watch limit)."""
        # IN_MASK_ADD: the kernel keeps one watch per directory and would otherwise replace
        # another caller's mask with ours (the union is what both need).
        flags = mask | IN_ONLYDIR | IN_MASK_ADD
        return int(self._libc.inotify_add_watch(self.fd, os.fsencode(dir_path), flags))

    def remove_watch(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)  # -1 when the kernel dropped it already

    def events(self, data: bytes) -> Iterator[tuple[int, int, str]]:
        offset = 0
        while offset < len(data):
            wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size : offset + _HEADER.size + size]
            offset += _HEADER.size + size
            yield wd, mask, raw.rstrip(b"\0").decode(errors="replace")


class Channel:
    """Wakes its waiters when an event in its mask happens in one of its directories.

    Channels share the watcher's lock but each has its own condition, so the reader thread
    notifies only the channels an event is for: other waiters do not even wake to re-check.
    Close it (or use it as a context manager) when done, so its directories stop costing
    events; the watch of one that is only dropped goes at the next event it would have had.
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
        self.watches: list[int] = []
        self.owner: Watcher | None = None

    @property
    def listening(self) -> bool:
        """Whether events still arrive (a forked child inherits no reader thread)."""
        return self.watched and self.pid == _pid

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

    def close(self) -> None:
        if self.owner is not None:
            self.owner.release(self)

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Watcher:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self._inotify = _Inotify(0)
        self._channels: dict[int, weakref.WeakSet[Channel]] = {}  # watch id -> its channels
        self.available = self._inotify.available
        if self.available:
            threading.Thread(target=self._run, name="taskhoster-inotify", daemon=True).start()

    @property
    def fd(self) -> int:
        return self._inotify.fd

    def channel(
        self, dir_paths: Iterable[str], mask: int, *, wanted: Callable[[str], bool] | None = None
    ) -> Channel:
        """A channel woken by `mask` events in any of the directories (named by path, or by
        /proc/self/fd/N); it polls if any of them cannot be watched.

        `wanted`: only events on names it accepts wake the channel (a waiting read wakes for
        its own task's file, not for every task of the queue); a lost-events overflow and a
        removed directory still wake it."""
        channel = Channel(self.lock, mask, watched=self.available, wanted=wanted)
        if not self.available:
            return channel
        channel.owner = self
        # Under the lock, so the reader cannot hand out an event (IN_IGNORED above all) for a
        # watch before the channel is in its set.
        with self.lock:
            for dir_path in dir_paths:
                wd = self._inotify.add_watch(dir_path, mask)
                if wd < 0:  # not a directory any more, or the watch limit: nothing is lost, late
                    channel.watched = False
                    continue
                self._channels.setdefault(wd, weakref.WeakSet()).add(channel)
                channel.watches.append(wd)
        return channel

    def release(self, channel: Channel) -> None:
        """Forget a closed channel; a directory no open channel needs stops being watched."""
        with self.lock:
            for wd in channel.watches:
                group = self._channels.get(wd)
                if group is None:
                    continue
                group.discard(channel)
                if not group:
                    del self._channels[wd]
                    self._inotify.remove_watch(wd)
            channel.watches = []
            channel.owner = None

    def watched_directories(self) -> int:
        with self.lock:
            return len(self._channels)

    def _run(self) -> None:
        while True:
            data = os.read(self.fd, 1 << 16)
            with self.lock:
                for wd, mask, name in self._inotify.events(data):
                    self._dispatch(wd, mask, name)

    def _dispatch(self, wd: int, mask: int, name: str) -> None:
        """Hand one event to the channels it is for; call with the lock held."""
        if mask & IN_Q_OVERFLOW:  # events were lost: wake everyone
            targets = [c for group in self._channels.values() for c in group]
        elif mask & IN_IGNORED:  # the directory is gone; its watch id may be reused
            targets = list(self._channels.pop(wd, ()))
        else:  # the kernel delivers the union of masks; each channel takes only its own
            group = self._channels.get(wd)
            if group is not None and not group:  # its channels were dropped without a close
                del self._channels[wd]
                self._inotify.remove_watch(wd)
            targets = [
                c for c in group or () if c.mask & mask and (c.wanted is None or c.wanted(name))
            ]
        for channel in targets:
            channel.event(mask, name)


class Subscription:
    """The names changed in one directory since the last drain, each with whether its last
    event left it there (created, moved in: True, or AGAIN after more than that one event) or
    took it away (deleted, moved out: False): a name taken away needs no read to know it is
    gone, and one this process wrote that nothing changed since needs none either (the pending
    index)."""

    def __init__(self, source: ChangeLog) -> None:
        self.source = source
        self.pid = os.getpid()
        self.watched = True
        self.wd = -1
        self.names: dict[str, bool | int] = {}
        self.overflowed = True  # the first drain lists the whole directory

    @property
    def listening(self) -> bool:
        """Whether events still arrive (a forked child's inherited instance is not its own)."""
        return self.watched and self.pid == _pid

    def event(self, mask: int, name: str) -> None:
        if mask & IN_IGNORED:  # the directory is gone: the index lists it from now on
            self.watched = False
        # Names pile up until the subscriber next drains, which an index of a queue nobody
        # lists or claims from here any more never does; past NAMES_HELD, one listing of the
        # directory is also cheaper than a read per name.
        if mask & (IN_Q_OVERFLOW | IN_IGNORED) or len(self.names) >= NAMES_HELD:
            self.overflowed, self.names = True, {}
        elif not self.overflowed:  # events come in order: the last one says where the name is
            if mask & (IN_MOVED_FROM | IN_DELETE):
                self.names[name] = False
            else:
                self.names[name] = AGAIN if name in self.names else True

    def drain(self, *, read: bool = True) -> tuple[bool, dict[str, bool | int]]:
        """Everything queued in the kernel up to now, then what it says about this directory
        (read False: up to the last read, for a caller whose thread has just made one)."""
        with self.source.lock:
            if read:
                self.source.read_queued()
            overflowed, names = self.overflowed, self.names
            self.overflowed, self.names = False, {}
        return overflowed, names

    def close(self) -> None:
        self.source.unsubscribe(self)


class ChangeLog:
    """A non-blocking inotify instance read only by its subscribers, in their own threads."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()  # read and dispatch together, so events stay in order
        self._inotify = _Inotify(IN_NONBLOCK)
        self._subs: dict[int, list[Subscription]] = {}
        self.available = self._inotify.available

    @property
    def fd(self) -> int:
        return self._inotify.fd

    def subscribe(self, dir_path: str, mask: int = ENTRIES) -> Subscription | None:
        """The names changing in one directory, or None without inotify (list it instead)."""
        if not self.available:
            return None
        sub = Subscription(self)
        with self.lock:
            wd = self._inotify.add_watch(dir_path, mask)
            if wd < 0:
                return None
            sub.wd = wd
            self._subs.setdefault(wd, []).append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget a subscription (its queue was closed); a directory no subscription needs
        stops being watched, so its names stop collecting."""
        with self.lock:
            sub.watched, sub.names = False, {}
            group = self._subs.get(sub.wd)
            if group is None or sub not in group:
                return  # the directory went already (IN_IGNORED), or never was watched
            group.remove(sub)
            if not group:
                del self._subs[sub.wd]
                # only from the process that made the watch: a forked child's number for the
                # parent's instance may name another descriptor by now
                if self.pid == os.getpid():
                    self._inotify.remove_watch(sub.wd)

    def read_queued(self) -> None:
        """Dispatch every queued event; call with the lock held."""
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return
            for wd, mask, name in self._inotify.events(data):
                self._dispatch(wd, mask, name)
            if len(data) <= _READ_SIZE - _LARGEST_EVENT:
                # a read takes every event queued when it is made, as many as fit: one that
                # left room for another took them all (a second read would only say EAGAIN)
                return

    def _dispatch(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:  # the kernel's queue filled up: every index lists again
            targets = [s for group in self._subs.values() for s in group]
        elif mask & IN_IGNORED:
            targets = self._subs.pop(wd, [])
        else:
            targets = self._subs.get(wd, [])
        for sub in targets:
            sub.event(mask, name)


_watcher: Watcher | None = None
_changes: ChangeLog | None = None
_sweep_changes: ChangeLog | None = None
_instances_lock = threading.Lock()


def watcher() -> Watcher:
    """This process's watcher (a forked child makes its own: threads do not survive fork)."""
    global _watcher
    with _instances_lock:
        _forget_the_parents()
        if _watcher is None:
            _watcher = Watcher()
        return _watcher


def changes() -> ChangeLog:
    """This process's change log for the pending indexes (a forked child makes its own)."""
    global _changes
    with _instances_lock:
        _forget_the_parents()
        if _changes is None:
            _changes = ChangeLog()
        return _changes


def sweep_changes() -> ChangeLog:
    """This process's change log for the sweep's due indexes (due_index.py), made on first use.
    An instance of its own: it watches writes and attribute changes in place too, and the kernel
    keeps one mask per directory and instance, so on the claims' instance those events would
    reach their indexes too (a close after an unlink names a file that is gone)."""
    global _sweep_changes
    with _instances_lock:
        _forget_the_parents()
        if _sweep_changes is None:
            _sweep_changes = ChangeLog()
        return _sweep_changes


def _forget_the_parents() -> None:
    """In a forked child, drop the instances inherited from the parent; call with the lock."""
    global _watcher, _changes, _sweep_changes
    if _inherited(_watcher):
        _watcher = None
    if _inherited(_changes):
        _changes = None
    if _inherited(_sweep_changes):
        _sweep_changes = None


def _inherited(instance: Watcher | ChangeLog | None) -> bool:
    """Whether `instance` is the parent's, in a forked child; if so its descriptor is closed:
    the child could not share it (the parent reads it), and it would only count against the
    per-user limit. The descriptor is checked first, in case the child closed its descriptors
    and the number now names something else."""
    if instance is None or instance.pid == os.getpid():
        return False
    if instance.available:
        try:
            if os.readlink(f"/proc/self/fd/{instance.fd}") == "anon_inode:inotify":
                os.close(instance.fd)
        except OSError:
            pass
    return True
