"""Dependencies on the file store: who waits for a task, and the release of the waiting tasks
when it ends (by the verb that ended it, by the post that came too late for that, or by the
sweep after a crash).

A task posted with `after` lives in pending/ like any other, its record's `waitingFor` naming
what it still waits for; the claim index skips such a record (index.py), so a claim never looks
at the waiting tasks. Each task that something waits for has a file in its queue's dependents/
directory, `<id>.waiters`, one line per task waiting for it ("queue/id", appended with
O_APPEND, so two posts naming one task both land, and a post costs one short write however
many already wait for the same task).
Ending a task reads that one file (an open that fails, for a task nobody waits for), so
releasing the dependents of a task costs what they are, never what the queue holds.

The order makes a crash harmless: a post registers the waiter before it writes the task, and
looks at its dependencies again after the write (one that ended in between is released by the
post); an ending releases the waiters after its own record is written, and the file goes only
after every waiter was released. The sweep's pass over dependents/ releases what a crash in
between left. Every release is idempotent (rules.plan_release), so two of them at once, or one
done twice, change a waiting task once.

An ending's request changes at most RELEASE_STEP waiters (a chain's included) before it
answers; what is left it hands to a thread of its process (background.py), which releases the
rest at once, so the answer is bounded whatever waits for the task, and the waiters are
released a moment later. The dependents file stays until every waiter was released, so a
process that dies first leaves it to the sweep, as a crash does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import threading
from collections import deque
from contextlib import AbstractContextManager
from typing import Literal, Protocol

from . import copies, files, paths, rules, strays
from .background import Background
from .errors import NotFound, StoreError
from .paths import QueueDirs
from .records import State, Task

# the waiters an ending's request changes at most (one record and one line each) before it
# answers; the rest are released by the process's background thread
RELEASE_STEP = 100

# a task whose waiters are to be released: host, queue, id, and how it ended (None: gone)
Awaited = tuple[str, str, str, State | None]
# one handed to the background: host, queue, id, and the time of its ending
Later = tuple[str, str, str, int]


class QueueCore(Protocol):
    """What of core.QueueCore this module uses (core.py calls it: no import back)."""

    fsync: files.Durable
    releases: Background[Later]

    def queue_dirs(
        self, host: str, queue: str, *, create: bool = False
    ) -> AbstractContextManager[QueueDirs]: ...

    def apply(
        self, qd: QueueDirs, source: str, old: Task, new: Task, event: str | None, *, now: int
    ) -> Task: ...


def resolve(core: QueueCore, host: str, refs: list[str]) -> dict[str, Task]:
    """Each "queue/id" a post names in `after`, as it stands; NotFound (a read's answer) for
    one that does not exist."""
    found: dict[str, Task] = {}
    for ref in refs:
        queue, task_id = rules.split_ref(ref)
        with core.queue_dirs(host, queue) as qd:
            found[ref] = copies.winner(qd, task_id).task
    return found


def prepare(core: QueueCore, task: Task) -> Task:
    """A new task with `after` made ready to be written: its dependencies read (NotFound for
    one that is not there), `waitingFor` the ones not finished, and the task registered as a
    waiter of each of those. Registered before it is written, so no ending can miss it."""
    if not task.after:
        return task
    found = resolve(core, task.host, task.after)
    waiting = [ref for ref in task.after if found[ref].status is not State.FINISHED]
    register(core, task, waiting)
    return dataclasses.replace(task, waiting_for=waiting or None)


def register(core: QueueCore, task: Task, waiting: list[str]) -> None:
    """Name `task` as a waiter in the dependents file of each task of `waiting`."""
    waiter = f"{task.queue}/{task.id}"
    for ref in waiting:
        queue, task_id = rules.split_ref(ref)
        with core.queue_dirs(task.host, queue) as qd:
            _register(core, qd, waiters_file(task_id), waiter.encode())


def statuses(core: QueueCore, task: Task) -> dict[str, State | None]:
    """The status of each task `task` was posted to run after (None: gone), for its retry:
    rules.plan_retry decides from them what it waits for again."""
    found: dict[str, State | None] = {}
    for ref in task.after or ():
        queue, task_id = rules.split_ref(ref)
        try:
            with core.queue_dirs(task.host, queue) as qd:
                found[ref] = copies.winner(qd, task_id).task.status
        except NotFound:
            found[ref] = None
    return found


def _register(core: QueueCore, qd: QueueDirs, name: str, waiter: bytes) -> None:
    """Append a waiter's line to a dependents file; one planted there that is no regular
    file (a FIFO would make the open wait for a reader) is moved aside first."""
    dependents = qd.fd(paths.DEPENDENTS_DIR)
    try:
        files.append_line_at(dependents, name, waiter, fsync=core.fsync)
    except OSError as exc:
        if not strays.is_stray(exc):
            raise
        strays.move_aside(qd, dependents, name, paths.DEPENDENTS_DIR)
        files.append_line_at(dependents, name, waiter, fsync=core.fsync)


def settle_new(core: QueueCore, task: Task, *, now: int) -> None:
    """After a waiting task is written (by its post, or by its retry): a dependency that ended
    since prepare() or statuses() read it may have read its dependents before this task was
    there, so the post (or the retry) releases it itself."""
    for ref in task.waiting_for or ():
        queue, task_id = rules.split_ref(ref)
        ended = _ended(core, task.host, queue, task_id)
        if ended is not False:
            release_one(core, task.host, ref, ended, f"{task.queue}/{task.id}", now=now)


def _ended(core: QueueCore, host: str, queue: str, task_id: str) -> State | Literal[False] | None:
    """The status of an ended task, None for one that is gone, False for one still running."""
    with core.queue_dirs(host, queue) as qd:
        found = copies.copies(qd, task_id) or copies.copies(qd, task_id)  # a move in between
    if not found:
        return None
    status = found[0].task.status
    return status if status.terminal else False


_releasing = threading.local()


def release_ended(core: QueueCore, ended: list[Task], *, now: int) -> None:
    """Release the waiters of tasks that just ended (QueueCore.apply calls it), at most
    RELEASE_STEP of them; the rest are handed to the background. What fails here is left to
    the sweep's pass: the ending itself stands."""
    work: deque[Awaited] | None = getattr(_releasing, "work", None)
    awaited = [(t.host, t.queue, t.id, t.status) for t in ended]
    if work is not None:  # inside a release already: the outer loop takes these too
        work.extend(awaited)
        return
    left = _release(core, deque(awaited), now=now, step=RELEASE_STEP)
    if left:
        core.releases.hand((host, queue, task_id, now) for host, queue, task_id, _ in left)


def release_later(core: QueueCore, later: Later) -> None:
    """The background's part (QueueCore.releases): every waiter of a task an ending handed
    on, as it stands now: one that is running again (retried since) keeps its waiters for
    its next ending."""
    host, queue, task_id, now = later
    ended = _ended(core, host, queue, task_id)
    if ended is not False:
        _release(core, deque([(host, queue, task_id, ended)]), now=now, step=None)


def _release(core: QueueCore, work: deque[Awaited], *, now: int, step: int | None) -> list[Awaited]:
    """Release the waiters of the tasks in `work`; a waiter it ends (a failed dependency) has
    its own waiters released in turn, from the work list rather than by recursion, so a long
    chain cannot overflow the stack. With `step`, stop after that many waiters: what is left
    of the work (the task being released first, its file still there) is returned."""
    _releasing.work = work
    try:
        while work and (step is None or step > 0):
            host, queue, task_id, ended = work[0]
            try:
                looked, whole = release_dependents(core, host, queue, task_id, ended, now=now,
                                                   limit=step)  # fmt: skip
            except (OSError, StoreError):
                looked, whole = 0, True  # left to the sweep's pass
            if not whole:
                break  # its file stays: the rest of its waiters are the caller's to hand on
            if step is not None:
                step -= looked
            work.popleft()
        return list(work)
    finally:
        _releasing.work = None


def release_dependents(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    ended: State | None,
    *,
    now: int,
    limit: int | None = None,
) -> tuple[int, bool]:
    """Release the waiters of one ended (or gone: None) task, at most `limit` of them, then
    drop its dependents file if that was all of them: how many waiters it changed or looked
    at (0: nobody waited for it), and whether that was all."""
    name = waiters_file(task_id)
    with core.queue_dirs(host, queue) as qd:
        try:
            waiters = _waiters(files.read_at(qd.fd(paths.DEPENDENTS_DIR), name))
        except FileNotFoundError:
            return 0, True
        except OSError as exc:
            if not strays.is_stray(exc):
                raise
            # planted, not ours: it names no waiter (a post's own look releases its task)
            strays.move_aside(qd, qd.fd(paths.DEPENDENTS_DIR), name, paths.DEPENDENTS_DIR)
            return 0, True
        if limit is not None and len(waiters) > limit:
            for waiter in waiters[:limit]:
                release_one(core, host, f"{queue}/{task_id}", ended, waiter, now=now)
            return limit, False
        for waiter in waiters:
            release_one(core, host, f"{queue}/{task_id}", ended, waiter, now=now)
        with contextlib.suppress(FileNotFoundError):
            files.unlink(qd.fd(paths.DEPENDENTS_DIR), name, fsync=core.fsync)
    return len(waiters), True


def release_one(
    core: QueueCore, host: str, dependency: str, ended: State | None, waiter: str, *, now: int
) -> None:
    """Apply the end of `dependency` to one waiter, under the waiter's lock (a waiter that is
    gone, or waits no more, is left as it is). Locks are taken from a dependency to its
    dependents, never back: the dependencies of a task were posted before it, so no circle."""
    queue, task_id = rules.split_ref(waiter)
    try:
        with core.queue_dirs(host, queue) as qd, copies.locked(qd, task_id) as found:
            change = rules.plan_release(found.task, found.directory, dependency, ended, now=now)
            if change is not None:
                core.apply(qd, change.source, change.old, change.new, change.event, now=now)
    except NotFound:
        pass  # not written yet (its post releases it), or gone


def sweep_dependents(core: QueueCore, qd: QueueDirs, *, now: int) -> int:
    """The sweep's pass over a queue's dependents/: every task there that has ended (or is
    gone) has its waiters released, as its ending would have, had it not crashed first (or had
    its process's background finished). Costs what the queue's awaited tasks are; returns how
    many ended tasks it released the waiters of."""
    released = 0
    for entry in os.scandir(qd.fd(paths.DEPENDENTS_DIR)):
        match = _WAITERS_FILE.fullmatch(entry.name)
        if match is None:
            continue
        if not entry.is_file(follow_symlinks=False):  # a FIFO, a directory, a symlink
            strays.move_aside(qd, qd.fd(paths.DEPENDENTS_DIR), entry.name, paths.DEPENDENTS_DIR)
            continue
        task_id = match.group(1)
        ended = _ended(core, qd.host, qd.queue, task_id)
        if ended is not False:
            _release(core, deque([(qd.host, qd.queue, task_id, ended)]), now=now, step=None)
            released += 1
    return released


_WAITERS_FILE = re.compile(r"([0-9a-f]{16})\.waiters", re.ASCII)
_WAITER = re.compile(rb"[a-z0-9][a-z0-9_-]{0,63}/[0-9a-f]{16}", re.ASCII)


def waiters_file(task_id: str) -> str:
    """The name of the file of a task's waiters, in its queue's dependents/ directory."""
    return task_id + ".waiters"


def _waiters(data: bytes) -> list[str]:
    """The waiters a file names, each once, in the order they came; what is not a whole
    "queue/id" line (a crash's fragment) is passed over."""
    found = dict.fromkeys(line.decode() for line in data.split(b"\n") if _WAITER.fullmatch(line))
    return list(found)
