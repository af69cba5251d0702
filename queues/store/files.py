"""Every system call that changes the disk, in one place, so durability reads in one screen.

Each call passes through `FAULTS.step(kind)` first: tests set `FAULTS` in a child process to make
the k-th call fail with an errno or end the process with `os._exit`, without mocking `os`.
Only EIO/ENOSPC-like errors (and running out of descriptors) become StorageUnavailable; a lost
race (FileNotFoundError, FileExistsError) propagates for the caller to treat as "someone else
changed it".
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import itertools
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .errors import StorageUnavailable
from .flushing import GroupFlush
from .settings import DEFAULT_UMASK, FLUSH_MODES

TEMP_PREFIX = ".tmp-"  # never ends in .json, so listings of task files never see a temp file
# the store cannot write now: the disk (full, failing, read-only) or the process (out of file
# descriptors, EMFILE; or the system, ENFILE), never the request
_STORAGE_ERRNOS = {errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EMFILE, errno.ENFILE}
_OPEN_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted under a task's name opens at once instead of waiting for a writer
# (on a regular file it changes nothing); the fstat after the open then refuses it
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100

# The modes of everything the store creates: the configured umask (StoreConfig.umask,
# TASKHOSTER_UMASK) taken off 0666 for files and 0777 for directories. The process's own umask
# (set once at start by the Django settings) still applies on top.
FILE_MODE, DIR_MODE = 0o666 & ~DEFAULT_UMASK, 0o777 & ~DEFAULT_UMASK


def use_umask(umask: int) -> None:
    """The modes the store's creates use from now on (a store opened with a StoreConfig)."""
    global FILE_MODE, DIR_MODE
    FILE_MODE, DIR_MODE = 0o666 & ~umask, 0o777 & ~umask


@dataclass(frozen=True)
class Flush:
    """How one store's durable writes are flushed (StoreConfig.flush, TASKHOSTER_FLUSH): each
    store carries its own to its writes as their `fsync` argument, so stores of both modes can
    live in one process. `syncfs` False: each file and directory its own fsync; True: one
    syncfs() of the file system, shared by a batch and by the concurrent operations of the
    process (group commit)."""

    syncfs: bool
    items_dev: int  # the items' file system: the event log shares its syncfs if it is on it

    def __bool__(self) -> bool:
        return True  # a Flush is always "flush": False is the store without fsync


@dataclass(frozen=True)
class Deferred:
    """What a step of a syncfs store's operation is told when the operation ends with one
    flush of its own (files.deferred): flush nothing now (false), yet know the store's Flush,
    for a write that must flush before it names anything (spare inodes: queues.store.spares)."""

    flush: Flush

    def __bool__(self) -> bool:
        return False


# What a write is told about flushing: False (none), True (per-file fsync), a store's Flush, or
# Deferred (none now: the operation's one flush comes after).
Durable = bool | Flush | Deferred


def flush_for(mode: str, items_fd: int) -> Flush:
    """The Flush of a store whose items root is `items_fd`, for `mode` ("fsync" or "syncfs")."""
    if mode not in FLUSH_MODES:
        raise ValueError(f"flush must be one of {', '.join(FLUSH_MODES)}, not {mode!r}")
    if mode == "syncfs" and _syncfs is None:
        raise ValueError("flush 'syncfs' needs the C library's syncfs() (Linux)")
    flush = Flush(syncfs=mode == "syncfs", items_dev=os.fstat(items_fd).st_dev)
    if flush.syncfs:
        flusher(items_fd, flush.items_dev)  # known before a line on another disk needs it
    return flush


def deferred(fsync: Durable) -> Durable:
    """The flush a step of an operation makes of its own, where the operation ends with one
    syncfs (its event line's, or flush_items): none (Deferred). That one flush covers every
    byte and name the operation wrote, and data=ordered keeps a fresh inode's bytes from being
    named before they are written (store.md, fourth version); per-file fsync keeps each its
    own."""
    return Deferred(fsync) if isinstance(fsync, Flush) and fsync.syncfs else fsync


def flush_items(fsync: Durable) -> None:
    """One syncfs of the items' file system, for a syncfs store (Flush or Deferred): the
    closing flush of an operation where no event line made it, or the data flush that comes
    before spare inodes are named."""
    flush = fsync.flush if isinstance(fsync, Deferred) else fsync
    if isinstance(flush, Flush) and flush.syncfs:
        _flushers[flush.items_dev].wait()


def _by_syncfs(fsync: Durable) -> bool:
    return isinstance(fsync, Flush) and fsync.syncfs


@dataclass
class Faults:
    """A test hook: counts each disk-changing call and can fail or exit at a chosen one."""

    calls: int = 0
    exit_at: int = 0  # os._exit(137) at this call number (1-based), 0 = never
    fail_at: int = 0  # raise OSError(fail_errno) at the n-th call of fail_kind (or of any kind)
    fail_kind: str | None = None
    fail_errno: int = errno.EIO
    record: bool = False  # keep `kinds`: off by default, or a long-lived server's list only grows
    kinds: list[str] = field(default_factory=list)  # the calls made, for tests that enumerate them
    # called with (call number, kind) before each call: a test changes the disk there, as
    # another process could at that instant (a race made to happen, not waited for)
    before: Callable[[int, str], None] | None = None
    _matching: int = 0

    def step(self, kind: str) -> None:
        self.calls += 1
        if self.record:
            self.kinds.append(kind)
        if self.before is not None:
            self.before(self.calls, kind)
        if self.exit_at == self.calls:
            os._exit(137)
        if self.fail_at and (self.fail_kind is None or self.fail_kind == kind):
            self._matching += 1
            if self._matching == self.fail_at:
                raise OSError(self.fail_errno, f"injected {os.strerror(self.fail_errno)}")

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


FAULTS = Faults()


# What reading a task file's name can meet that is no task file (a symlink planted in the store,
# a directory, a socket, a FIFO, a device): the sweep quarantines it, and claims pass it by.
_NOT_A_TASK_FILE = {errno.ELOOP, errno.EISDIR, errno.ENXIO}


class NotRegularFile(OSError):
    """The name opened is no regular file (a FIFO, a directory, a device): never read."""

    def __init__(self, name: str) -> None:
        super().__init__(errno.ENXIO, "Not a regular file", name)


def gone_or_not_a_task_file(exc: OSError) -> bool:
    """Whether a read's OSError means "no task here": vanished, or not a task file. Anything
    else (EMFILE, EIO, ...) says the store cannot read now and must not be taken for either."""
    return isinstance(exc, FileNotFoundError) or exc.errno in _NOT_A_TASK_FILE


def unreadable(exc: OSError) -> StorageUnavailable:
    """A read the store could not make now (out of descriptors, an I/O error): a 503."""
    return StorageUnavailable(f"The store could not read a task: {exc.strerror}.")


def _storage(exc: OSError) -> OSError | StorageUnavailable:
    if exc.errno in _STORAGE_ERRNOS:
        return StorageUnavailable(f"The store could not write: {exc.strerror}.")
    return exc


@contextlib.contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Any OSError of the block is the store unable to write `what` now (a read-only or full
    file system, a directory it may not write): a 503, never a 500."""
    try:
        yield
    except StorageUnavailable:
        raise
    except OSError as exc:
        raise StorageUnavailable(f"The store could not write {what}: {exc.strerror}.") from exc


def _call(kind: str, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    try:
        FAULTS.step(kind)
        return fn(*args, **kwargs)
    except OSError as exc:
        raise _storage(exc) from exc


# A temp file's name: this process's random prefix and a counter. One random draw per process
# (made again in a forked child) instead of a getrandom system call for every file written;
# O_EXCL still refuses a name that exists, as it did with one random draw per file.
_temp_prefix = TEMP_PREFIX + secrets.token_hex(6) + "-"
_temp_counter = itertools.count()


class LogsTopDir:
    """A directory at the top of the logs disk (tasks/, tasks-payloads/) that this process
    makes only until it has seen it. Once seen, a missing one is the logs disk gone (unmounted,
    so its path is the empty mount point's): a write below it is refused (and its line
    spooled), never made on the disk beneath the mount point, where it would be hidden once
    the disk is mounted again."""

    def __init__(self, path: str | os.PathLike[str], *, make_now: bool = True) -> None:
        self.path, self.seen = os.fspath(path), False
        if not make_now:  # made by the first write below it (the archive: a queue's option)
            self.seen = os.path.isdir(self.path)
            return
        # made now if it can be: a read-only or full logs disk must not keep the store from
        # opening; a write then makes it, or is refused
        with contextlib.suppress(OSError):
            self.make()

    def make(self) -> None:
        """Make it (FileNotFoundError once it was seen and is gone)."""
        if self.seen:
            if not os.path.isdir(self.path):
                raise FileNotFoundError(errno.ENOENT, "the logs disk is gone", self.path)
            return
        os.makedirs(self.path, mode=DIR_MODE, exist_ok=True)
        self.seen = True


def temp_name() -> str:
    """A name for a new temp file that no other writer, in any process, picks."""
    return f"{_temp_prefix}{next(_temp_counter):x}"


def _new_temp_names_in_child() -> None:
    global _temp_prefix, _temp_counter
    _temp_prefix, _temp_counter = TEMP_PREFIX + secrets.token_hex(6) + "-", itertools.count()


os.register_at_fork(after_in_child=_new_temp_names_in_child)


def write_temp(dir_fd: int, data: bytes, *, fsync: Durable) -> str:
    """Write `data` to a fresh temp file in the directory; returns its name."""
    name = temp_name()
    fd = _call("open", os.open, name, _OPEN_NEW, FILE_MODE, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[_call("write", os.write, fd, view) :]
        if fsync and _by_syncfs(fsync):
            flush_file_systems([dir_fd])
        elif fsync:
            _call("fsync", os.fsync, fd)
    except BaseException:
        discard(dir_fd, name)
        raise
    finally:
        os.close(fd)
    return name


# A batch's data fsyncs are issued together from this many threads: the file system then
# commits its journal once for the fsyncs that wait on it together (ext4's jbd2 batches them),
# where one thread's fsyncs each wait for a commit of their own. Each file still has its own
# fsync, and every one of them returns before any of the batch's renames.
PARALLEL_FSYNCS = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _fsync_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(PARALLEL_FSYNCS, thread_name_prefix="taskhoster-fsync")
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child has none of its parent's threads: it makes a pool of its own."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


def write_temps(writes: list[tuple[int, bytes]], *, fsync: Durable) -> list[str]:
    """write_temp for a batch of (directory, data), answering the temp names in order: every
    file is written, then all are fsynced at once (each its own fsync, PARALLEL_FSYNCS at a
    time). On any failure every temp of the batch is removed and the first error raised."""
    made: list[tuple[int, str, int]] = []  # (dir_fd, name, fd)
    try:
        for dir_fd, data in writes:
            name = temp_name()
            fd = _call("open", os.open, name, _OPEN_NEW, FILE_MODE, dir_fd=dir_fd)
            made.append((dir_fd, name, fd))
            view = memoryview(data)
            while view:
                view = view[_call("write", os.write, fd, view) :]
        if fsync and made and _by_syncfs(fsync):
            flush_file_systems([dir_fd for dir_fd, _, _ in made])  # one flush for them all
        elif fsync and len(made) > 1:
            syncs = [_fsync_pool().submit(_call, "fsync", os.fsync, fd) for _, _, fd in made]
            futures.wait(syncs)  # every one has returned before a descriptor is closed
            for done in syncs:
                done.result()  # the first failure raises
        elif fsync and made:
            _call("fsync", os.fsync, made[0][2])
    except BaseException:
        for dir_fd, name, _ in made:
            discard(dir_fd, name)
        raise
    finally:
        for _, _, fd in made:
            os.close(fd)
    return [name for _, name, _ in made]


def discard(dir_fd: int, name: str) -> None:
    """Remove our own temp file after a failed write; the sweep removes any we cannot."""
    # the original failure is what the caller must see; a temp we cannot remove is swept later
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def commit_temp(dir_fd: int, temp: str, name: str, *, fsync: Durable) -> None:
    """Rename the temp into place (replacing), then make the new name durable."""
    try:
        _call("rename", os.rename, temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        discard(dir_fd, temp)
        raise
    if fsync:
        sync_dir(dir_fd, fsync)


def sync_dir(dir_fd: int, fsync: Durable = True) -> None:
    """Make the entries of a directory durable (after the renames and unlinks made in it)."""
    if _by_syncfs(fsync):
        flush_file_systems([dir_fd])
    else:
        _call("fsync_dir", os.fsync, dir_fd)


class DirSyncs:
    """The directory fsyncs a batch owes, each directory synced once for all of its entries
    (group commit within one call): the renames of a batch's files come first, then one fsync
    per directory they touched, and only then is anything acknowledged or unlinked."""

    def __init__(self, *, fsync: Durable) -> None:
        self.fsync = fsync
        self._owed: dict[int, None] = {}  # ordered: the order the directories were touched

    def owe(self, dir_fd: int) -> None:
        if self.fsync:
            self._owed[dir_fd] = None

    def flush(self) -> None:
        if self._owed and _by_syncfs(self.fsync):
            flush_file_systems(list(self._owed))  # one flush covers every directory's entries
            self._owed.clear()
        while self._owed:
            dir_fd = next(iter(self._owed))
            sync_dir(dir_fd, self.fsync)
            del self._owed[dir_fd]  # only once synced: a failed fsync leaves it owed


def write_durable(dir_fd: int, name: str, data: bytes, *, fsync: Durable) -> None:
    """Temp-then-rename, so no reader ever sees a half-written file."""
    commit_temp(dir_fd, write_temp(dir_fd, data, fsync=fsync), name, fsync=fsync)


def open_record_file(dir_fd: int, name: str) -> int:
    """Open (making it if new) a small file a lock holder rewrites in place (write_record);
    NotRegularFile for a FIFO or device planted there (ELOOP: a symlink, EISDIR: a directory)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    fd: int = _call("open", os.open, name, flags, FILE_MODE, dir_fd=dir_fd)
    _regular_or_closed(fd, name)
    return fd


def _regular_or_closed(fd: int, name: str) -> None:
    """NotRegularFile (and `fd` closed) unless `fd` is open on a regular file."""
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise NotRegularFile(name)


def write_record(fd: int, data: bytes, *, fsync: Durable) -> None:
    """Write a fixed-size record over the file's first bytes, for a writer that holds the lock
    every writer of the file takes: one pwrite of a few bytes, which a killed process makes
    whole or not at all (a signal is taken on the way out of the call, never midway through its
    copy), and the file never changes its size."""
    written = _call("write", os.pwrite, fd, data, 0)
    if written != len(data):
        raise StorageUnavailable(f"Wrote {written} of {len(data)} bytes of a record.")
    if fsync:
        _call("fsync", os.fsync, fd)


def publish_new(dir_fd: int, temp: str, name: str, *, fsync: Durable) -> None:
    """Give the temp its final name only if that name is free (FileExistsError otherwise).

    A no-replace rename rather than a link: the name then arrives as a rename, the one event a
    waiting claim listens for (queues.store.inotify.ARRIVALS)."""
    try:
        rename_noreplace(dir_fd, temp, dir_fd, name)
    except BaseException:
        discard(dir_fd, temp)
        raise
    if fsync:
        sync_dir(dir_fd, fsync)


_RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)
_links = _renameat2 is None  # whether a no-replace rename has had to fall back to link()
_syncfs = getattr(_libc, "syncfs", None)


def syncfs(fd: int) -> None:
    """syncfs(2): write back everything of the file system `fd` is on, and wait for it. Since
    Linux 5.8 it also reports a write-back error (EIO) met since this descriptor was opened."""
    if _syncfs is None:
        raise OSError(errno.ENOSYS, "syncfs() is not available")
    if _syncfs(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


# one GroupFlush per file system (st_dev), each flushing through a descriptor of its own
_flushers: dict[int, GroupFlush] = {}
_flushers_lock = threading.Lock()


def flusher(fd: int, dev: int | None = None) -> GroupFlush:
    """The shared flushes of the file system `fd` is on (`dev`, when the caller knows it)."""
    if dev is None:
        dev = os.fstat(fd).st_dev
    found = _flushers.get(dev)
    if found is None:
        with _flushers_lock:
            found = _flushers.get(dev)
            if found is None:
                own = os.dup(fd)  # lives as long as the process: the caller may close `fd`
                found = _flushers[dev] = GroupFlush(lambda: _call("syncfs", syncfs, own))
    return found


# the file system of each directory a QueueDirs holds open, noted when it opens them and
# forgotten before it closes them (a closed number may name another file next): a flush of
# its writes then needs no fstat to know which file system to flush
_devices: dict[int, int] = {}


def note_device(fd: int) -> None:
    """Remember the file system of `fd`, a directory held open until forget_device."""
    _devices[fd] = os.fstat(fd).st_dev


def forget_device(fd: int) -> None:
    """`fd` is about to be closed: its number may name another file after."""
    _devices.pop(fd, None)


def flush_file_systems(fds: list[int]) -> None:
    """Make everything written so far on the file systems of `fds` durable: one shared syncfs
    each (a StorageUnavailable if it failed: nothing it covered may be acknowledged)."""
    devices: dict[int, int] = {}
    for fd in dict.fromkeys(fds):  # a batch's files share a few directories: one fstat each
        dev = _devices.get(fd)
        devices.setdefault(os.fstat(fd).st_dev if dev is None else dev, fd)
    for dev, fd in devices.items():
        flusher(fd, dev).wait()


def _forget_flushers_in_child() -> None:
    """A forked child has none of its parent's threads (a round's leader among them)."""
    global _flushers, _flushers_lock
    _flushers, _flushers_lock = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_flushers_in_child)


def creates_by_link() -> bool:
    """Whether this process has made task names by link(), which inotify reports as a create
    rather than a rename (a file system without RENAME_NOREPLACE)."""
    return _links


def rename_noreplace(src_fd: int, name: str, dst_fd: int, new_name: str | None = None) -> None:
    """Move `name` (to `new_name`, by default the same), never replacing an existing destination.

    A plain rename would silently overwrite a leased copy left behind by a crash. Raises
    FileNotFoundError when someone else moved the source first, FileExistsError when the
    destination exists.
    """
    global _links
    target = name if new_name is None else new_name
    try:
        FAULTS.step("rename")
    except OSError as exc:
        raise _storage(exc) from exc
    if _renameat2 is not None:
        if _renameat2(src_fd, name.encode(), dst_fd, target.encode(), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL):
            raise _storage(OSError(code, os.strerror(code), name))
    _links = True
    try:  # the fallback: link fails with EEXIST, unlink of the source makes it a move
        os.link(name, target, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
        os.unlink(name, dir_fd=src_fd)
    except OSError as exc:
        raise _storage(exc) from exc


def exchange(src_fd: int, name: str, dst_fd: int, other: str) -> None:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE): each names the other's inode.
    OSError(ENOSYS or EINVAL) where the C library or the file system has no such call."""
    FAULTS.step("rename")
    if _renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2() is not available")
    if _renameat2(src_fd, name.encode(), dst_fd, other.encode(), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise _storage(OSError(code, os.strerror(code), name))


def can_exchange() -> bool:
    """Whether the C library has renameat2 (the file system may still refuse: EINVAL)."""
    return _renameat2 is not None


def open_spare(dir_fd: int, name: str) -> int | None:
    """A descriptor to write the spare file `name` over, its lock held (flock, as every task
    file's writer takes): None when another writer holds it, or the name no longer names the
    inode locked (taken and named since), or it is no regular file, or it is a second name of
    a record (that spare name is removed)."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = int(_call("open", os.open, name, flags, dir_fd=dir_fd))
    except (FileNotFoundError, NotRegularFile):
        return None
    except OSError as exc:
        if exc.errno in _NOT_A_TASK_FILE:
            return None
        raise
    try:
        held = os.fstat(fd)
        if stat.S_ISREG(held.st_mode) and held.st_nlink > 1:
            # A second name of a live record: a claim links the pending record here before it
            # renames the leased one over it, and a crash between the two leaves both names.
            # Written over, it would change that record; the spare's name alone goes.
            with contextlib.suppress(FileNotFoundError):
                _call("unlink", os.unlink, name, dir_fd=dir_fd)
        elif stat.S_ISREG(held.st_mode) and lock_open(dir_fd, name, fd, block=False, opened=held):
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def rewrite(fd: int, data: bytes) -> None:
    """Write `data` over a spare inode and cut it to that length. Not flushed: the caller
    flushes the data before it names the file (store.md, fourth version)."""
    view, at = memoryview(data), 0
    while at < len(data):
        at += _call("write", os.pwrite, fd, view[at:], at)
    _call("truncate", os.ftruncate, fd, len(data))


def link_into(src_fd: int, name: str, dst_fd: int, new_name: str) -> None:
    """A second name for the file `name` (spares.keep): FileNotFoundError if it is gone."""
    _call("link", os.link, name, new_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd,
          follow_symlinks=False)  # fmt: skip


def retire_into(src_fd: int, name: str, spare_fd: int | None, spare: str) -> None:
    """A file no longer needed (a moved task's old copy, a record retention is done with)
    becomes the spare `spare` instead of being freed (spare_fd None: unlinked, as before).
    FileNotFoundError when it is gone already; a spare name taken (FileExistsError: another
    writer's) leaves it to be unlinked."""
    if spare_fd is None:
        unlink(src_fd, name, fsync=False)
        return
    try:
        rename_noreplace(src_fd, name, spare_fd, spare)
    except FileExistsError:
        unlink(src_fd, name, fsync=False)


def move(src_fd: int, dst_fd: int, name: str, data: bytes, *, fsync: Durable) -> None:
    """Content first: write the destination durably, then unlink the source.

    A crash between the two leaves the task in two directories; the copy with the higher rev
    (this destination) wins and the sweep deletes the other. The source's directory is not
    flushed: the destination's flush already made the new state durable, and an unlink that a
    power cut takes back only leaves that same second copy (store.md, third version).
    """
    write_durable(dst_fd, name, data, fsync=fsync)
    unlink(src_fd, name, fsync=False)


def unlink(dir_fd: int, name: str, *, fsync: Durable) -> None:
    _call("unlink", os.unlink, name, dir_fd=dir_fd)
    if fsync:
        sync_dir(dir_fd, fsync)


def create_empty(dir_fd: int, name: str) -> None:
    """Make an empty file whose name is all it says (a group's member: queues.store.groups);
    FileExistsError if the name is taken. The caller syncs the directory once for a batch."""
    os.close(_call("open", os.open, name, _OPEN_NEW, FILE_MODE, dir_fd=dir_fd))


def remove_dir(parent_fd: int, name: str) -> None:
    """Remove an empty directory (a group's, once its callback is long posted)."""
    _call("rmdir", os.rmdir, name, dir_fd=parent_fd)


def rename_aside(src_fd: int, name: str, dst_fd: int, new_name: str) -> None:
    """Move a file (or a symlink, which is never followed) to a new name, e.g. quarantine."""
    _call("rename", os.rename, name, new_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)


def make_dir(parent_fd: int, name: str, *, fsync: Durable) -> None:
    """Make a directory and, with fsync on, make its entry durable in the parent.

    Without the parent's fsync a power cut can take a new queue's directories, and with them a
    post that was already acknowledged. The parent is synced even when another process won
    the mkdir: that process may not have synced it yet.
    """
    with contextlib.suppress(FileExistsError):  # another process made it first: the same outcome
        _call("mkdir", os.mkdir, name, DIR_MODE, dir_fd=parent_fd)
    if fsync:
        sync_dir(parent_fd, fsync)


def open_append(path: str) -> int:
    # read too: a new descriptor looks at the file's last byte (ends_mid_line)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    return int(_call("open", os.open, path, flags, FILE_MODE))


def append(fd: int, data: bytes, *, fsync: Durable, dev: int | None = None) -> None:
    """One write on an O_APPEND descriptor, so lines from many processes never interleave.

    A write cut short (a full disk takes what fits) keeps the whole lines it wrote: a reader
    may have read them already (Task Logs files a line by its day-file and offset), so they
    are never taken back and the next line never lands where one of them was. Only the
    fragment after them is cut back off the file, so that the next line, this process's or
    another's, is not glued to it. TornWrite says how much stands and whether the fragment
    could be cut back (not where another line was appended after it, or the truncate failed):
    the writer then starts its next line on a fresh line, and readers pass over the fragment
    (queues.store.eventlog.whole_line)."""
    written = _call("append", os.write, fd, data)
    if written != len(data):
        whole = data.rfind(b"\n", 0, written) + 1
        raise TornWrite(cut_back=_cut_back(fd, written - whole), whole=whole)
    if isinstance(fsync, Flush) and fsync.syncfs and _device(fd, dev) == fsync.items_dev:
        try:  # the logs share the items' file system, and its flushes
            flusher(fd, fsync.items_dev).wait()
        except StorageUnavailable as exc:
            raise ClosingFlushFailed() from exc
    elif fsync:
        try:
            _call("fsync", os.fdatasync, fd)
        except (OSError, StorageUnavailable) as exc:
            raise FlushFailed() from exc
        try:  # the line's flush closes the operation (deferred): the items' disk's too
            flush_items(fsync)
        except StorageUnavailable as exc:
            raise ClosingFlushFailed() from exc


class FlushFailed(StorageUnavailable):
    """An append written whole whose flush failed: the disk may have its bytes or not (a disk
    that failed as it flushed). The caller must not take them as unwritten: a line spooled so is
    looked for in the day-file before it is appended again (spool.py)."""

    def __init__(self) -> None:
        super().__init__("The logs disk did not flush a line it was given.")


class ClosingFlushFailed(StorageUnavailable):
    """The syncfs that closes an operation (its records and its line, files.deferred) failed:
    nothing it covered may be taken as durable, so the operation is refused, never spooled
    and acknowledged. Its line was written whole and stands (a reader may have read it)."""

    def __init__(self) -> None:
        super().__init__("The items disk did not flush a change.")


def _device(fd: int, dev: int | None) -> int:
    """The file system of `fd`: `dev` when its caller knows it (held since `fd` opened)."""
    return os.fstat(fd).st_dev if dev is None else dev


class TornWrite(StorageUnavailable):
    """An append written only in part. `whole`: how many of its bytes, whole lines, stand in
    the file; `cut_back`: the fragment after them was taken off the file again."""

    def __init__(self, *, cut_back: bool, whole: int = 0) -> None:
        super().__init__("A log line was written only in part.")
        self.cut_back, self.whole = cut_back, whole


def _cut_back(fd: int, fragment: int) -> bool:
    """Take the last `fragment` bytes of a short append back off the end of the file, if
    they are still its end: whether the file now ends where a line of this append (or the
    file before it) ended."""
    if fragment <= 0:
        return True
    try:
        end = os.lseek(fd, 0, os.SEEK_CUR)  # after an O_APPEND write: just past our own bytes
        if os.fstat(fd).st_size != end:
            return False  # another line came after it: never cut into that
        os.ftruncate(fd, end - fragment)
    except OSError:
        return False
    return True


def ends_mid_line(fd: int) -> bool:
    """Whether the file's last byte is not a newline (a fragment some writer left behind).

    Another process's append can be seen half done (a write that spans pages grows the file a
    page at a time), so a file that still grows is looked at again: only an end that stays
    mid-line is a fragment. A write descheduled longer than that costs an empty line, which
    readers pass over."""
    size = os.fstat(fd).st_size
    for _ in range(_MID_LINE_LOOKS):
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return False
        time.sleep(0.001)
        grown = os.fstat(fd).st_size
        if grown == size:
            return True
        size = grown
    return True


_MID_LINE_LOOKS = 5


def remove_file(path: str) -> None:
    _call("unlink", os.unlink, path)


def read_at(dir_fd: int, name: str) -> bytes:
    """Read a whole file without following a symlink (ELOOP: the caller treats it as corrupt)
    and without blocking on, or reading, anything but a regular file (NotRegularFile)."""
    fd = open_read(dir_fd, name)
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


_READ_SIZE = 1 << 16


def read_fd(fd: int) -> bytes:
    """The whole of a task file. Its content never changes once it has its name, and a read of
    a regular file comes back short only at its end: a first read shorter than asked is the
    whole file, without a second read to meet the end (most records are a few hundred bytes)."""
    chunk = os.read(fd, _READ_SIZE)
    if len(chunk) < _READ_SIZE:
        return chunk
    chunks = [chunk]
    while chunk := os.read(fd, _READ_SIZE):
        chunks.append(chunk)
    return b"".join(chunks)


def lock_at(dir_fd: int, name: str, *, block: bool) -> int | None:
    """Lock the file now at `name` (flock on its inode) and return an open descriptor.

    Returns None when the name no longer points at the inode we locked (someone replaced or
    moved it while we waited) or, when not blocking, when another process holds the lock.
    Raises FileNotFoundError when there is no such file.
    """
    fd, opened = open_regular(dir_fd, name)
    if lock_open(dir_fd, name, fd, block=block, opened=opened):
        return fd
    os.close(fd)
    return None


def open_read(dir_fd: int, name: str) -> int:
    """A descriptor to read the regular file at `name`: never through a symlink (ELOOP), and
    never anything else (NotRegularFile), opened without blocking (a FIFO would wait forever
    for a writer)."""
    return open_regular(dir_fd, name)[0]


def open_regular(dir_fd: int, name: str) -> tuple[int, os.stat_result]:
    """open_read, and the fstat that proved the file regular: the inode it names, which a
    lock taken on the descriptor later compares without a second fstat (lock_open)."""
    fd = os.open(name, _OPEN_READ, dir_fd=dir_fd)
    try:
        opened = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        raise NotRegularFile(name)
    return fd, opened


def lock_open(
    dir_fd: int, name: str, fd: int, *, block: bool, opened: os.stat_result | None = None
) -> bool:
    """Lock `fd`, opened on the file at `name`: whether `name` still names that inode once
    the lock is held (False too when, not blocking, another process holds the lock).

    A file's content never changes while it has its name (every write is temp-then-rename, or
    into a spare inode that no name names), so what was read from `fd` before the lock is still
    the record when this answers True: the caller need not open or read it again. A spare may
    come back under the same name, written over: `opened`'s change time tells it apart. On
    False the caller closes `fd`. `opened`: the descriptor's fstat from its open
    (open_regular), if the caller has it: a descriptor names one inode for as long as it is
    open, so it need not be asked again."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if block else fcntl.LOCK_EX | fcntl.LOCK_NB)
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        held = os.fstat(fd) if opened is None else opened
        # a spare inode (queues.store.spares) may have been written over and named again here
        # since `opened`: its change time moved with the rewrite, so it is not the file read
        return (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev) and (
            opened is None or now.st_ctime_ns == opened.st_ctime_ns
        )
    except (BlockingIOError, FileNotFoundError):
        return False  # someone else holds it or moved it: a lost race, the caller skips


def append_line_at(dir_fd: int, name: str, line: bytes, *, fsync: Durable) -> None:
    """Append one line to a file of lines below `dir_fd`, made if missing (a task's waiters:
    queues.store.dependencies). The line starts on a fresh line, so a fragment a crash left
    at the end is never glued to it; readers pass over what is not a whole line. A FIFO or
    device planted there is never written to (NotRegularFile; ENXIO when a FIFO has no
    reader, ELOOP for a symlink, EISDIR for a directory): an open would wait for a reader."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    fd = int(_call("open", os.open, name, flags, FILE_MODE, dir_fd=dir_fd))
    _regular_or_closed(fd, name)
    try:
        data = b"\n" + line + b"\n"
        if _call("append", os.write, fd, data) != len(data):
            raise StorageUnavailable("The store could not write a whole line.")
        if fsync:
            _call("fsync", os.fdatasync, fd)
    finally:
        os.close(fd)
    if fsync:
        sync_dir(dir_fd)
