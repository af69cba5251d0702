"""Name validation and the only code that builds paths.

Names are checked against an ASCII allow-list before anything reaches the file system. Inside
the items directory every directory is opened with O_NOFOLLOW relative to its parent's
descriptor, and every file is then opened relative to those descriptors, so a symlink planted
anywhere inside the store is never followed.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import re
from pathlib import Path
from typing import Protocol

from . import files
from .errors import InvalidName, NotFound, StorageUnavailable

_HOST = re.compile(r"[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63})*", re.ASCII)
_QUEUE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.ASCII)
_TASK_ID = re.compile(r"[0-9a-f]{16}", re.ASCII)
_TASK_FILE = re.compile(r"([0-9a-f]{16})\.json", re.ASCII)

STATE_DIRS = ("pending", "processing", "done")
KEYS_DIR = "keys"  # idempotency keys: a sibling of the state directories, never inside them
QUARANTINE_DIR = "quarantine"
# who waits for a task of this queue: one file per task that has dependents (dependencies.py)
DEPENDENTS_DIR = "dependents"
# a queue's groups (groups.py): opened when used, beside the directories kept open, as the
# parent's post-seq file is
GROUPS_DIR = "groups"
# spare inodes to write records into (queues.store.spares): never read as tasks
SPARE_DIR = "spare"
QUEUE_DIRS = (*STATE_DIRS, KEYS_DIR, QUARANTINE_DIR, DEPENDENTS_DIR, SPARE_DIR)
SWEEP_LOCK = ".sweep.lock"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def validate_host(host: str) -> str:
    if not isinstance(host, str) or len(host) > 253 or not _HOST.fullmatch(host):
        raise InvalidName()
    return host


def validate_queue(queue: str) -> str:
    if not isinstance(queue, str) or not _QUEUE.fullmatch(queue):
        raise InvalidName()
    return queue


def validate_task_id(task_id: str) -> str:
    if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
        raise NotFound()
    return task_id


def task_file(task_id: str) -> str:
    return task_id + ".json"


def task_id_of(name: str) -> str | None:
    """The id a directory entry names, or None for anything that is not a task file."""
    match = _TASK_FILE.fullmatch(name)
    return match.group(1) if match else None


def key_file(posted_by: str | None, key: str) -> str:
    """An idempotency key's file: (postedBy or public, key) hashed to a safe, fixed-size name."""
    owner = "user:" + posted_by if posted_by is not None else "public"
    return hashlib.sha256(f"{owner}\0{key}".encode()).hexdigest()[:32] + ".json"


_KEY_FILE = re.compile(r"[0-9a-f]{32}\.json", re.ASCII)


def is_key_file(name: str) -> bool:
    """Whether a name in keys/ is one key_file() makes."""
    return _KEY_FILE.fullmatch(name) is not None


def open_dir(parent_fd: int, name: str, *, create: bool, fsync: files.Durable = True) -> int:
    """Open a directory below `parent_fd` without following a symlink."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
    files.make_dir(parent_fd, name, fsync=fsync)
    return open_dir(parent_fd, name, create=False)


class Closable(Protocol):
    def close(self) -> None: ...


class QueueDirs:
    """Open descriptors of one queue's directories: pending, processing, done, keys, quarantine,
    dependents.

    Used only while held (queues.store.openqueues: `users` counts the holders), since a queue
    nobody holds may be closed and its descriptor numbers reused by another open: `fd` refuses
    rather than hand out a number that may now name something else."""

    def __init__(self, root_fd: int, host: str, queue: str, *, create: bool,
                 fsync: files.Durable = True) -> None:  # fmt: skip
        self.host, self.queue = validate_host(host), validate_queue(queue)
        self.fds: dict[str, int] = {}
        self.users = 0
        # what another module keeps open beside the directories, closed with them (limits.py:
        # the queue's flow.json and its gate's counts)
        self.attached: dict[str, Closable] = {}
        opened: list[int] = []
        try:
            host_fd = open_dir(root_fd, host, create=create, fsync=fsync)
            opened.append(host_fd)
            queue_fd = open_dir(host_fd, queue, create=create, fsync=fsync)
            opened.append(queue_fd)
            for name in QUEUE_DIRS:
                self.fds[name] = open_dir(queue_fd, name, create=True, fsync=fsync)
                files.note_device(self.fds[name])
        except FileNotFoundError as exc:
            self.close()
            raise NotFound() from exc
        except OSError as exc:
            self.close()
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise StorageUnavailable(f"{host}/{queue} is not a real directory.") from exc
            raise
        finally:
            for fd in opened:
                os.close(fd)

    def fd(self, name: str) -> int:
        if self.users <= 0 or not self.fds:
            raise RuntimeError(used_outside_hold(self))
        return self.fds[name]

    def proc_path(self, name: str) -> str:
        """A path naming the opened directory itself (for inotify), immune to later symlinks."""
        return f"/proc/self/fd/{self.fd(name)}"

    def close(self) -> None:
        for extra in self.attached.values():
            extra.close()
        self.attached = {}
        for fd in self.fds.values():
            files.forget_device(fd)
            os.close(fd)
        self.fds = {}


def used_outside_hold(qd: QueueDirs) -> str:
    return (
        f"The directories of {qd.host}/{qd.queue} were used outside a hold"
        " (QueueCore.queue_dirs) or after the store was closed."
    )


def open_root(items_dir: Path) -> int:
    """The items root is configuration (it may itself be a symlink, e.g. /srv -> /data)."""
    items_dir.mkdir(mode=files.DIR_MODE, parents=True, exist_ok=True)
    return os.open(items_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def list_queues(root_fd: int) -> list[tuple[str, str]]:
    found = []
    for host_entry in os.scandir(root_fd):
        if not host_entry.is_dir(follow_symlinks=False) or not _valid(
            validate_host, host_entry.name
        ):
            continue
        try:
            host_fd = open_dir(root_fd, host_entry.name, create=False)
        except FileNotFoundError:
            continue  # removed since the listing
        try:
            for entry in os.scandir(host_fd):
                if entry.is_dir(follow_symlinks=False) and _valid(validate_queue, entry.name):
                    found.append((host_entry.name, entry.name))
        finally:
            os.close(host_fd)
    return sorted(found)


def _valid(check: object, name: str) -> bool:
    try:
        check(name)  # type: ignore[operator]
    except InvalidName:
        return False
    return True


def day_file(logs_dir: Path, day: dt.date) -> Path:
    return logs_dir / "tasks" / f"{day.isoformat()}.jsonl"


def day_of_file(name: str) -> dt.date | None:
    if not name.endswith(".jsonl"):
        return None
    try:
        return dt.date.fromisoformat(name.removesuffix(".jsonl"))
    except ValueError:
        return None


def archive_root(logs_dir: Path) -> Path:
    return logs_dir / "tasks-payloads"


def archive_dir(logs_dir: Path, host: str, queue: str, task_id: str) -> Path:
    parts = (validate_host(host), validate_queue(queue), validate_task_id(task_id))
    return archive_root(logs_dir).joinpath(*parts)
