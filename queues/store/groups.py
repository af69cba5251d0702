"""Groups on the file store: the members a group counts, their endings, and its callback,
posted once when the group is closed and every member has ended.

A group lives in its queue's groups/ directory, `groups/<group>/`:

    owner        the producer whose post made the group (null: a public post's); another
                 producer's post naming the group is refused as if it did not exist
    count        posted, ended, and the ended by outcome (GROUP_OUTCOMES): a fixed-size
                 record rewritten in place (files.write_record) under an flock on it, the
                 group's one lock
    members/<id> an empty file per member, made by its post before the task is written
    ended/<id>   the outcome the member first ended with, made content first and exclusively
                 (a no-replace rename): a member counts once, however often it ends
    unfinished   the members that did not finish, one line each (the callback's list)
    closing      the onComplete of a closing post whose tasks are being written, and their ids
    closed       the onComplete of the post that closed the group (it takes no more members)
    callback     the callback task posted, "queue" and "id": the group is done

An ending costs what one member is, never what the group holds: under the lock, one marker,
one line when it did not finish, one rewrite of the count. The order makes a crash harmless:
a post registers its members (and raises `posted`) before it writes them, so the count never
says "all ended" while one is unwritten; the closing post writes `closing` after its members'
count and renames it `closed` once its tasks are written, so a refused closing post (no room,
a disk that refused) closes nothing; an ending marks and counts after its own record is
written. What a crash leaves in
between (a record ended but not counted, a count a marker ahead of it, a member registered and
never written, a `closing` whose post died) the sweep's recount repairs (sweep_groups), so a
crash delays the callback and never loses or doubles it. The callback is posted with an
Idempotency-Key derived from the group (rules.callback_key), so two enders or two sweeps that
both see the group complete post one task, and `callback` stops any later post once the key is
cleaned with its task.

A called-back group goes with its callback task: once that task is gone (cleaned by its queue's
retention, or deleted), the sweep renames the group's directory aside (`.gone-<group>-<hex>`,
under the group's lock) and then deletes it. The name is free from the rename on: a post that
waited for the lock finds the name no longer names the directory it opened, and starts again
(a new group). A crash leaves an aside directory, which the next pass deletes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol, cast

import orjson

from . import copies, files, paths, rules, sequence, strays
from .batch import OnComplete
from .errors import GroupClosed, IdempotencyKeyReused, NotFound, StoreError
from .eventlog import EventLog
from .paths import QueueDirs
from .records import State, Task
from .results import ANY, GROUP_OUTCOMES, GroupCounts, GroupView, _Any
from .settings import QueueSettings

COUNT, MEMBERS, ENDED = "count", "members", "ended"
CLOSED, CALLBACK, UNFINISHED = "closed", "callback", "unfinished"
# the closing post's onComplete and task ids while its tasks are written: renamed to `closed`
# once they are, taken back when the post is refused
CLOSING = "closing"
OWNER = "owner"  # the producer of the group's first post: only its posts join the group
GONE_PREFIX = ".gone-"  # a removed group's directory, renamed aside until it is deleted
_REMOVALS_MET = 3  # a post that finds its group removed under it this often is refused
_WIDTH = 16  # digits of each count, written whole: a record never changes its size
_NUMBERS = 2 + len(GROUP_OUTCOMES)
_RECORD_SIZE = _NUMBERS * (_WIDTH + 1)


class QueueCore(Protocol):
    """What of core.QueueCore this module uses (core.py calls it: no import back)."""

    fsync: files.Durable
    log: EventLog

    def queue_dirs(
        self, host: str, queue: str, *, create: bool = False
    ) -> AbstractContextManager[QueueDirs]: ...

    def admit(
        self, qd: QueueDirs, task: Task, *, now: int, settings: QueueSettings
    ) -> Task | None: ...


# -- the group's directory and its count ------------------------------------------------------


def _open_dir(
    qd: QueueDirs, parent_fd: int, name: str, where: str, *, create: bool, fsync: files.Durable
) -> int:
    """paths.open_dir, with anything but a directory planted at the name (a FIFO, a file, a
    symlink) moved aside first (strays.py); FileNotFoundError for none, unless `create`."""
    try:
        return paths.open_dir(parent_fd, name, create=create, fsync=fsync)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or not strays.is_stray(exc):
            raise
    strays.move_aside(qd, parent_fd, name, where, wanted=stat.S_ISDIR)
    return paths.open_dir(parent_fd, name, create=create, fsync=fsync)


@contextlib.contextmanager
def _groups_dir(qd: QueueDirs, *, create: bool, fsync: files.Durable) -> Iterator[int]:
    """The queue's groups/ directory, open for the block (NotFound when it was never made)."""
    # the queue's directory, as the parent of its pending/ (opened without following a
    # symlink): no descriptor more is kept open per queue for groups
    queue_fd = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=qd.fd("pending"))
    try:
        groups_fd = _open_dir(qd, queue_fd, paths.GROUPS_DIR, "", create=create, fsync=fsync)
    except FileNotFoundError as exc:
        raise NotFound() from exc
    finally:
        os.close(queue_fd)
    try:
        yield groups_fd
    finally:
        os.close(groups_fd)


@contextlib.contextmanager
def _group_dir(qd: QueueDirs, group: str, *, create: bool, fsync: files.Durable) -> Iterator[int]:
    """The group's directory, open for the block (NotFound for a group never posted to)."""
    with _groups_dir(qd, create=create, fsync=fsync) as groups_fd:
        try:
            gfd = _open_dir(qd, groups_fd, group, paths.GROUPS_DIR, create=create, fsync=fsync)
        except FileNotFoundError as exc:
            raise NotFound() from exc
    try:
        yield gfd
    finally:
        os.close(gfd)


# what each of a group's entries is: a regular file, or (members/, ended/) a directory
_FILES = (OWNER, COUNT, CLOSING, CLOSED, CALLBACK, UNFINISHED)
_DIRS = (MEMBERS, ENDED)
_TORN = b"moved aside\n"  # a count written over a planted one: torn, so it is recounted


def _tidy(qd: QueueDirs, group: str, gfd: int, *, fsync: files.Durable) -> None:
    """Move aside what was planted under the name of one of the group's entries (strays.py):
    a FIFO or a symlink as its count or owner, a file as its members/. A count moved aside
    is replaced by a torn one (the next post or sweep recounts it from the members), an owner
    by the one its closing post or members name. One fstatat per entry."""
    where = f"{paths.GROUPS_DIR}/{group}"
    moved = set()
    for name, want in [*((n, stat.S_ISREG) for n in _FILES), *((n, stat.S_ISDIR) for n in _DIRS)]:
        try:
            mode = os.stat(name, dir_fd=gfd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        if not want(mode) and strays.move_aside(qd, gfd, name, where, wanted=want):
            moved.add(name)
    if COUNT in moved:
        files.write_durable(gfd, COUNT, _TORN, fsync=fsync)
    if OWNER in moved:
        _recover_owner(qd, gfd, fsync=fsync)


def _recover_owner(qd: QueueDirs, gfd: int, *, fsync: files.Durable) -> None:
    """Write the group's owner again from what says who posted to it: its closing post's
    record, else the first of its members whose task is there. With none, the group has no
    owner until its next post (as a new group)."""
    for name in (CLOSED, CLOSING):
        with contextlib.suppress(FileNotFoundError, ValueError, KeyError, TypeError, OSError):
            posted_by = orjson.loads(files.read_at(gfd, name))["postedBy"]
            files.write_durable(gfd, OWNER, orjson.dumps({"postedBy": posted_by}), fsync=fsync)
            return
    try:
        members_fd = paths.open_dir(gfd, MEMBERS, create=False)
    except OSError:
        return
    try:
        names = sorted(n for n in os.listdir(members_fd) if paths.task_id_of(n + ".json"))
    finally:
        os.close(members_fd)
    for task_id in names:
        with contextlib.suppress(NotFound):
            posted_by = copies.winner(qd, task_id).task.posted_by
            files.write_durable(gfd, OWNER, orjson.dumps({"postedBy": posted_by}), fsync=fsync)
            return


def _still_named(qd: QueueDirs, group: str, gfd: int) -> bool:
    """Whether the group's name still names the directory open at `gfd`: not once the sweep
    renamed it aside (a removed group), whose name may name a new group's since."""
    try:
        with _groups_dir(qd, create=False, fsync=False) as groups_fd:
            named = os.stat(group, dir_fd=groups_fd, follow_symlinks=False)
    except (NotFound, FileNotFoundError):
        return False
    opened = os.fstat(gfd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


@contextlib.contextmanager
def _subdir(gfd: int, name: str, *, create: bool, fsync: files.Durable) -> Iterator[int | None]:
    """members/ or ended/ of a group, open for the block; None when it was never made."""
    try:
        fd = paths.open_dir(gfd, name, create=create, fsync=fsync)
    except FileNotFoundError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


class _Count:
    """The group's count file, locked: what it says (None when it is torn or unreadable: only
    the sweep's recount may then decide), and its rewrite."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.counts = _parse(os.pread(fd, _RECORD_SIZE + 1, 0))

    def save(self, counts: GroupCounts, *, fsync: files.Durable) -> None:
        numbers = (counts.posted, counts.ended, *counts.by_outcome)
        files.write_record(self.fd, b"".join(b"%0*d\n" % (_WIDTH, n) for n in numbers),
                           fsync=fsync)  # fmt: skip
        self.counts = counts


def _parse(data: bytes) -> GroupCounts | None:
    if not data:
        return GroupCounts()  # a group whose first post is registering
    numbers = data.split(b"\n")[:-1]
    if (
        len(data) != _RECORD_SIZE
        or len(numbers) != _NUMBERS
        or not all(n.isdigit() for n in numbers)
    ):
        return None
    posted, ended, *by = (int(n) for n in numbers)
    return GroupCounts(posted, ended, tuple(by))


@contextlib.contextmanager
def _locked(gfd: int) -> Iterator[_Count]:
    """The group's lock: every change of its members, markers and count is made under it."""
    fd = files.open_record_file(gfd, COUNT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield _Count(fd)
    finally:
        os.close(fd)  # and with it the lock


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


# -- posts --------------------------------------------------------------------------------------


def register(
    core: QueueCore,
    qd: QueueDirs,
    group: str,
    tasks: list[Task],
    *,
    on_complete: OnComplete | None,
    posted_by: str | None,
    now: int,
) -> None:
    """Make `tasks` members of the group before they are written; with `on_complete`, close
    the group after them. GroupClosed if a post closed it already."""
    for _ in range(_REMOVALS_MET):
        with _group_dir(qd, group, create=True, fsync=core.fsync) as gfd:
            _tidy(qd, group, gfd, fsync=core.fsync)
            with _locked(gfd) as count:
                if not _still_named(qd, group, gfd):
                    continue  # removed while this post waited for its lock: the name is free
                _register(core, qd, group, gfd, count, tasks, on_complete, posted_by, now)
                return
    raise GroupClosed()


def _register(
    core: QueueCore,
    qd: QueueDirs,
    group: str,
    gfd: int,
    count: _Count,
    tasks: list[Task],
    on_complete: OnComplete | None,
    posted_by: str | None,
    now: int,
) -> None:
    """register's work, under the group's lock."""
    fsync = core.fsync
    _check_owner(gfd, posted_by, fsync=fsync)
    if _exists(gfd, CLOSED):
        raise GroupClosed()
    if on_complete is not None and _settle_closing(core, qd, gfd, now):
        raise GroupClosed()  # another closing post is writing its tasks (or its close stood)
    counts = count.counts
    if counts is None:
        counts = _recount(core, qd, group, gfd, count, now)
    with _subdir(gfd, MEMBERS, create=True, fsync=fsync) as members:
        assert members is not None
        for task in tasks:
            files.create_empty(members, task.id)
        if fsync:
            files.sync_dir(members, fsync)
    with _subdir(gfd, ENDED, create=True, fsync=fsync):
        pass  # made now, so an ending never has to make a directory
    count.save(dataclasses.replace(counts, posted=counts.posted + len(tasks)), fsync=fsync)
    if on_complete is not None:  # after the count: `closed` never sees fewer members
        record = {**rules.closing_record(on_complete, posted_by), "tasks": [t.id for t in tasks]}
        files.write_durable(gfd, CLOSING, orjson.dumps(record), fsync=fsync)


def close(core: QueueCore, qd: QueueDirs, group: str, *, now: int) -> None:
    """The closing post's tasks are written: its `closing` becomes `closed` (the group takes no
    more members), and the group's callback is posted if every member has ended already."""
    with _group_dir(qd, group, create=False, fsync=core.fsync) as gfd:
        with _locked(gfd) as count:
            _promote(gfd, fsync=core.fsync)
            due = _due(gfd, count.counts)
        if due:
            _call_back(core, qd, gfd, group, now=now)


def _promote(gfd: int, *, fsync: files.Durable) -> None:
    """Under the lock: `closing` renamed `closed` (a rename: the group is closed or not)."""
    with contextlib.suppress(FileNotFoundError):  # promoted already (by the sweep)
        files.rename_aside(gfd, CLOSING, gfd, CLOSED)
        if fsync:
            files.sync_dir(gfd, fsync)


def _settle_closing(core: QueueCore, qd: QueueDirs, gfd: int, now: int) -> bool:
    """Under the lock: whether a `closing` stands in the group's way. One younger than
    GROUP_GONE_MS is a post still writing its tasks (True); an older one was left by a post
    that died: `closed` if one of its tasks was written (its close stood, True), removed if
    none was (False, as when there is none)."""
    try:
        made = os.stat(CLOSING, dir_fd=gfd, follow_symlinks=False).st_mtime_ns // 1_000_000
        record = orjson.loads(files.read_at(gfd, CLOSING))
    except FileNotFoundError:
        return False
    if now - made < rules.GROUP_GONE_MS:
        return True
    if any(copies.exists(qd, task_id) for task_id in record.get("tasks", [])):
        _promote(gfd, fsync=core.fsync)
        return True
    with contextlib.suppress(FileNotFoundError):
        files.unlink(gfd, CLOSING, fsync=core.fsync)
    return False


def _check_owner(gfd: int, posted_by: str | None, *, fsync: files.Durable) -> None:
    """Under the lock: the first post makes the group its producer's; NotFound (the tenant
    rule) for a post of anyone else."""
    try:
        owner = orjson.loads(files.read_at(gfd, OWNER))["postedBy"]
    except FileNotFoundError:
        files.write_durable(gfd, OWNER, orjson.dumps({"postedBy": posted_by}), fsync=fsync)
        return
    if owner != posted_by:
        raise NotFound()


def unregister(
    core: QueueCore,
    qd: QueueDirs,
    group: str,
    task_ids: list[str],
    *,
    closing: bool = False,
    now: int,
) -> None:
    """Take back members whose post wrote nothing (an Idempotency-Key replay, a failed write),
    and with `closing` the close of a closing post that was refused."""
    with _group_dir(qd, group, create=False, fsync=core.fsync) as gfd:
        with _locked(gfd) as count, _subdir(gfd, MEMBERS, create=False, fsync=False) as members:
            if closing:  # first: a group whose last members ended must not look complete
                with contextlib.suppress(FileNotFoundError):
                    files.unlink(gfd, CLOSING, fsync=core.fsync)
            if count.counts is None or members is None:
                return  # the sweep's recount sees them gone
            removed = 0
            for task_id in task_ids:
                with contextlib.suppress(FileNotFoundError):
                    files.unlink(members, task_id, fsync=False)
                    removed += 1
            if core.fsync:
                files.sync_dir(members, core.fsync)
            counts = count.counts
            count.save(
                dataclasses.replace(counts, posted=counts.posted - removed), fsync=core.fsync
            )
            due = _due(gfd, count.counts)
        if due:
            _call_back(core, qd, gfd, group, now=now)


# -- endings ----------------------------------------------------------------------------------


def note_ended(core: QueueCore, ended: list[Task], *, now: int) -> None:
    """Count the members among tasks that just ended (QueueCore.apply calls it), and post a
    group's callback when that made it complete. What fails here is left to the sweep's
    recount: the ending itself stands."""
    by_group: dict[tuple[str, str, str], list[Task]] = {}
    for task in ended:
        if task.group is not None:
            by_group.setdefault((task.host, task.queue, task.group), []).append(task)
    for (host, queue, group), tasks in by_group.items():
        with contextlib.suppress(OSError, StoreError), core.queue_dirs(host, queue) as qd:
            _note(core, qd, group, [(t.id, t.status.value) for t in tasks], now=now)


def _note(
    core: QueueCore, qd: QueueDirs, group: str, ended: list[tuple[str, str]], *, now: int
) -> None:
    with _group_dir(qd, group, create=False, fsync=core.fsync) as gfd:
        with _locked(gfd) as count:
            if count.counts is None:
                return  # torn: the sweep recounts it
            # unsynced, as the markers: what a power cut takes, the recount brings back
            count.save(_mark(gfd, count.counts, ended), fsync=False)
            due = _due(gfd, count.counts)
        if due:
            _call_back(core, qd, gfd, group, now=now)


def _mark(gfd: int, counts: GroupCounts, ended: list[tuple[str, str]]) -> GroupCounts:
    """Each member's ending marked and counted, unless it was already (under the lock).

    Not synced: the ending's own record is (before this), and the markers, `unfinished` and the
    count are all made again from the members' records by the sweep's recount. A process's
    crash leaves them in the page cache; a power cut may take them (or leave a marker empty:
    the recount reads such a member's record), which delays the callback to the next sweep,
    as a crash before them does. So an ending pays no fsync for its group."""
    with _subdir(gfd, ENDED, create=True, fsync=False) as ended_fd:
        assert ended_fd is not None
        for task_id, outcome in ended:
            temp = files.write_temp(ended_fd, outcome.encode(), fsync=False)
            try:
                files.publish_new(ended_fd, temp, task_id, fsync=False)
            except FileExistsError:
                continue  # it ended before (then a retry ran it again): it counts once
            if outcome != State.FINISHED.value:
                files.append_line_at(gfd, UNFINISHED, task_id.encode(), fsync=False)
            counts = counts.counted(outcome)
    return counts


def _due(gfd: int, counts: GroupCounts | None) -> bool:
    if counts is None:
        return False
    closed, called_back = _exists(gfd, CLOSED), _exists(gfd, CALLBACK)
    return rules.group_state(counts, closed=closed, called_back=called_back) == "complete"


def _call_back(core: QueueCore, qd: QueueDirs, gfd: int, group: str, *, now: int) -> None:
    """Post the complete group's callback and note it in `callback`. Racing enders and sweeps
    post one task: the post's Idempotency-Key (rules.callback_key) makes the second a replay."""
    if _exists(gfd, CALLBACK):
        return
    on_complete, posted_by = rules.closing_of(orjson.loads(files.read_at(gfd, CLOSED)))
    with _locked(gfd) as count:
        counts = count.counts
    if counts is None or not _due(gfd, counts):
        return
    task = rules.group_callback(qd.host, qd.queue, group, on_complete, counts,
                                _unfinished(gfd), posted_by=posted_by, now=now)  # fmt: skip
    with core.queue_dirs(qd.host, on_complete.queue, create=True) as cqd:
        try:
            task = task.numbered(sequence.draw(cqd, 1, posted_at=now))
            prior = core.admit(cqd, task, now=now, settings=on_complete.settings)
            if prior is None:  # ours: Task Logs tells the callback from a post by its line
                core.log.append(task, "callback", now=now)
            posted = prior or task
        except IdempotencyKeyReused:
            # another poster's count of the outcome differed (a recount in between): its
            # callback stands
            key = paths.key_file(posted_by, rules.callback_key(qd.queue, group))
            posted = copies.winner(
                cqd, orjson.loads(files.read_at(cqd.fd(paths.KEYS_DIR), key))["id"]
            ).task
    called = orjson.dumps({"queue": posted.queue, "id": posted.id, "at": now})
    files.write_durable(gfd, CALLBACK, called, fsync=core.fsync)


def _unfinished(gfd: int) -> list[str]:
    """The members that did not finish, each once, sorted (two posters build one item)."""
    try:
        data = files.read_at(gfd, UNFINISHED)
    except FileNotFoundError:
        return []
    return sorted(
        {line.decode() for line in data.split(b"\n") if paths.task_id_of(line.decode() + ".json")}
    )


# -- the sweep's recount -----------------------------------------------------------------------


def sweep_groups(core: QueueCore, qd: QueueDirs, *, now: int) -> int:
    """The sweep's pass over a queue's open groups: each is recounted from its members and
    their tasks (what a crash between an ending and its count left), and a complete one's
    callback posted. Costs what the open groups' unended members are; returns how many groups
    it looked at."""
    looked = 0
    _delete_aside(qd)  # what a crash left of a removal
    for group in _groups(qd):
        with (
            contextlib.suppress(NotFound),
            _group_dir(qd, group, create=False, fsync=core.fsync) as gfd,
        ):
            _tidy(qd, group, gfd, fsync=core.fsync)
            if _exists(gfd, CALLBACK):
                if _callback_gone(core, qd, gfd):
                    _remove(qd, group, gfd)
                continue
            looked += 1
            with _locked(gfd) as count:
                if not _exists(gfd, CLOSED):
                    _settle_closing(core, qd, gfd, now)  # what a closing post's crash left
                _recount(core, qd, group, gfd, count, now)
                due = _due(gfd, count.counts)
            if due:
                _call_back(core, qd, gfd, group, now=now)
    return looked


def _callback_gone(core: QueueCore, qd: QueueDirs, gfd: int) -> bool:
    """Whether the group's callback task is gone from its queue (cleaned or deleted), and with
    it its Idempotency-Key: the group may go too."""
    try:
        called = orjson.loads(files.read_at(gfd, CALLBACK))
        queue, task_id = paths.validate_queue(called["queue"]), called["id"]
        paths.validate_task_id(task_id)
    except (ValueError, KeyError, TypeError, StoreError):
        return False  # not a marker we wrote: the group stays for an operator to look at
    try:
        with core.queue_dirs(qd.host, queue) as cqd:
            return not copies.exists(cqd, task_id)
    except NotFound:
        return True  # its queue is gone, with its tasks


def _remove(qd: QueueDirs, group: str, gfd: int) -> None:
    """Rename the group's directory aside under its lock, then delete it (module docstring)."""
    aside = f"{GONE_PREFIX}{group}-{secrets.token_hex(4)}"
    with _locked(gfd), _groups_dir(qd, create=False, fsync=False) as groups_fd:
        if not _still_named(qd, group, gfd):
            return  # another sweep removed it first
        files.rename_aside(groups_fd, group, groups_fd, aside)
    _delete_aside(qd)


def _delete_aside(qd: QueueDirs) -> None:
    """Delete the directories of removed groups (renamed aside by _remove)."""
    try:
        with _groups_dir(qd, create=False, fsync=False) as groups_fd:
            for entry in os.scandir(groups_fd):
                name = entry.name
                if not name.startswith(GONE_PREFIX):
                    continue
                if not entry.is_dir(follow_symlinks=False):  # planted: nothing of ours
                    strays.move_aside(qd, groups_fd, name, paths.GROUPS_DIR, wanted=stat.S_ISDIR)
                    continue
                try:
                    _delete_tree(groups_fd, name)
                except OSError as exc:
                    # another sweep deleting it too, or a post that waited for the removed
                    # group's lock made a file in it since: the next pass finishes it
                    if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY):
                        raise
    except NotFound:
        return


def _delete_tree(parent_fd: int, name: str) -> None:
    """Delete a directory and what it holds (a group's: files, and members/ and ended/), each
    step a disk call of files' (the kill tests stop at each), never following a symlink."""
    fd = paths.open_dir(parent_fd, name, create=False)
    try:
        for entry in os.scandir(fd):
            if entry.is_dir(follow_symlinks=False):
                _delete_tree(fd, entry.name)
            else:
                files.unlink(fd, entry.name, fsync=False)
    finally:
        os.close(fd)
    files.remove_dir(parent_fd, name)


def _groups(qd: QueueDirs) -> list[str]:
    """The names of the queue's groups; anything else than a directory under a group's name
    is moved aside (strays.py)."""
    try:
        with _groups_dir(qd, create=False, fsync=False) as groups_fd:
            names = []
            for entry in os.scandir(groups_fd):
                if not _valid_group(entry.name):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    names.append(entry.name)
                else:
                    strays.move_aside(qd, groups_fd, entry.name, paths.GROUPS_DIR,
                                      wanted=stat.S_ISDIR)  # fmt: skip
    except NotFound:
        return []
    return sorted(names)


def _valid_group(name: str) -> bool:
    try:
        paths.validate_queue(name)
    except StoreError:
        return False
    return True


def _recount(
    core: QueueCore, qd: QueueDirs, group: str, gfd: int, count: _Count, now: int
) -> GroupCounts:
    """Under the group's lock: mark the members that ended without being counted (and those
    registered but never written, once GROUP_GONE_MS have passed), then set the count to what
    the markers say, when it says otherwise."""
    with _subdir(gfd, MEMBERS, create=False, fsync=False) as members_fd, \
            _subdir(gfd, ENDED, create=True, fsync=core.fsync) as ended_fd:  # fmt: skip
        assert ended_fd is not None
        where = f"{paths.GROUPS_DIR}/{group}"
        members = _regular_names(qd, f"{where}/{MEMBERS}", members_fd)
        ended = set(_regular_names(qd, f"{where}/{ENDED}", ended_fd))
        late = []
        for task_id in members:
            if task_id not in ended:
                outcome = _outcome(qd, members_fd, task_id, now)
                if outcome is not None:
                    late.append((task_id, outcome))
        counts = count.counts
        if late or counts is None or counts.posted != len(members) or counts.ended != len(ended):
            _mark(gfd, GroupCounts(), late)  # markers and lines only: counted below
            counts = _count_markers(qd, gfd, ended_fd, len(members))
            count.save(counts, fsync=core.fsync)
    return counts


def _names(dir_fd: int | None) -> list[str]:
    if dir_fd is None:
        return []
    return [name for name in os.listdir(dir_fd) if paths.task_id_of(name + ".json") == name]


def _regular_names(qd: QueueDirs, where: str, dir_fd: int | None) -> list[str]:
    """_names of members/ or ended/ for the recount: an entry that is no regular file (a
    FIFO or a directory under a task's name) is moved aside instead (strays.py)."""
    if dir_fd is None:
        return []
    names = []
    for entry in os.scandir(dir_fd):
        if paths.task_id_of(entry.name + ".json") != entry.name:
            continue
        if entry.is_file(follow_symlinks=False):
            names.append(entry.name)
        else:
            strays.move_aside(qd, dir_fd, entry.name, where)
    return names


def _outcome(qd: QueueDirs, members_fd: int | None, task_id: str, now: int) -> str | None:
    """How an uncounted member stands: its status once it ended, "gone" once its post is
    GROUP_GONE_MS old and it was never written (or is gone), None while it may still run."""
    found = copies.copies(qd, task_id)
    if found:
        status = found[0].task.status
        return status.value if status.terminal else None
    assert members_fd is not None
    try:
        made = os.stat(task_id, dir_fd=members_fd, follow_symlinks=False).st_mtime_ns // 1_000_000
    except FileNotFoundError:
        return None
    return "gone" if now - made >= rules.GROUP_GONE_MS else None


def _count_markers(qd: QueueDirs, gfd: int, ended_fd: int, posted: int) -> GroupCounts:
    """The count as the markers tell it; `unfinished` rewritten from them too. A marker a power
    cut left empty says nothing: its member's record does (gone, when it is gone)."""
    counts = GroupCounts(posted=posted)
    unfinished = []
    for task_id in _names(ended_fd):
        try:
            outcome = files.read_at(ended_fd, task_id).decode()
        except FileNotFoundError:
            continue
        if outcome not in GROUP_OUTCOMES:
            found = copies.copies(qd, task_id)
            status = found[0].task.status if found else None
            outcome = status.value if status is not None and status.terminal else "gone"
        counts = counts.counted(outcome)
        if outcome != State.FINISHED.value:
            unfinished.append(task_id)
    data = b"".join(b"\n" + task_id.encode() + b"\n" for task_id in unfinished)
    files.write_durable(gfd, UNFINISHED, data, fsync=False)
    return counts


# -- reads --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _reading(
    core: QueueCore, host: str, queue: str, group: str, *, tidy: bool = True
) -> Iterator[tuple[QueueDirs, int]]:
    """The queue's directories and the group's, opened to read; NotFound for a name that is
    not a group's or a group never posted to. `tidy` False: the caller tidies the group
    itself (read_group, which first refuses another producer's group as cheaply as a
    missing one)."""
    try:
        paths.validate_queue(group)
    except StoreError as exc:
        raise NotFound() from exc
    with (
        core.queue_dirs(host, queue) as qd,
        _group_dir(qd, group, create=False, fsync=False) as gfd,
    ):
        if tidy:
            _tidy(qd, group, gfd, fsync=core.fsync)  # a page's read never meets a FIFO
        try:
            yield qd, gfd
        except FileNotFoundError as exc:  # removed as it was read (sweep_groups)
            raise NotFound() from exc


def _owner(qd: QueueDirs, group: str, gfd: int, *, fsync: files.Durable) -> str | None:
    """Who posted the group (None: no owner file), read before the group is tidied; an owner
    planted as no regular file is tidied (moved aside, written again) and read once more."""
    for _ in range(2):
        try:
            return cast(str | None, orjson.loads(files.read_at(gfd, OWNER))["postedBy"])
        except FileNotFoundError:
            return None
        except OSError as exc:
            if not strays.is_stray(exc):
                raise
            _tidy(qd, group, gfd, fsync=fsync)
    return None


def read_group(
    core: QueueCore, host: str, queue: str, group: str, *, seen_by: str | _Any | None = ANY
) -> GroupView:
    """The group's progress as it stands; NotFound for a group never posted to, and for one
    posted by another producer than `seen_by` (unless ANY), told from its owner file alone."""
    with _reading(core, host, queue, group, tidy=False) as (qd, gfd):
        # the refusal before the group's tidy (one fstatat per entry): another producer's
        # group costs what a missing one does, so its name cannot be told by the time
        owner = _owner(qd, group, gfd, fsync=core.fsync)
        if seen_by is not ANY and owner is not None and owner != seen_by:
            raise NotFound()  # another producer's group: as if it had never been posted to
        _tidy(qd, group, gfd, fsync=core.fsync)  # a page's read never meets a FIFO
        with _locked(gfd) as count:
            if not _still_named(qd, group, gfd):
                raise NotFound()  # removed since it was opened (sweep_groups)
            counts = count.counts or GroupCounts()
        closing: dict[str, Any] | None = None
        with contextlib.suppress(FileNotFoundError):
            closing = orjson.loads(files.read_at(gfd, CLOSED))
        callback: dict[str, Any] | None = None
        with contextlib.suppress(FileNotFoundError):
            callback = orjson.loads(files.read_at(gfd, CALLBACK))
    state = rules.group_state(counts, closed=closing is not None, called_back=callback is not None)
    return GroupView(
        host=host,
        queue=queue,
        group=group,
        state=state,
        counts=counts,
        posted_by=owner,
        on_complete_queue=None if closing is None else closing["queue"],
        callback=None if callback is None else (callback["queue"], callback["id"]),
    )


def names(core: QueueCore, host: str, queue: str, *, limit: int) -> list[str]:
    """The first `limit` of the queue's groups by name (the console's queue page lists them).
    A read: a stray under groups/ is left for the sweep to move aside."""
    try:
        with core.queue_dirs(host, queue) as qd, _groups_dir(qd, create=False, fsync=False) as fd:
            found = [e.name for e in os.scandir(fd)
                     if _valid_group(e.name) and e.is_dir(follow_symlinks=False)]  # fmt: skip
    except NotFound:  # no group was ever posted to the queue
        return []
    return sorted(found)[:limit]


def members(core: QueueCore, host: str, queue: str, group: str, *, limit: int) -> list[Task]:
    """Up to `limit` tasks of the group as they stand (by id: the console's page shows the
    first of them), in post order; a task cleaned since is left out."""
    with _reading(core, host, queue, group) as (qd, gfd):
        with _subdir(gfd, MEMBERS, create=False, fsync=False) as members_fd:
            names = sorted(_names(members_fd))[:limit]
        found = []
        for task_id in names:
            with contextlib.suppress(NotFound):
                found.append(copies.winner(qd, task_id).task)
    return sorted(found, key=lambda t: (t.posted_at, t.seq, t.id))
