"""Claiming: the atomic rename that hands a pending task to exactly one worker, the waiting
claim that sleeps until a task arrives (or its caller leaves), and the claim given back
before its caller heard of it."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable

import orjson

from . import copies, files, gate, limits, paths, rules
from .clock import now_ms
from .core import QueueCore
from .errors import CorruptRecord, StorageUnavailable
from .eventlog import LinesRefused
from .inotify import Channel, arrivals, watcher
from .paths import QueueDirs
from .records import State, Task
from .rules import (
    STILL_WANTED_SECONDS,
    Change,
    check_max_tasks,
    check_worker,
    checked_lease_ms,
    claim_stamp,
    claimed,
)
from .settings import QueueSettings


def claim(
    core: QueueCore,
    host: str,
    queue: str,
    *,
    settings: QueueSettings,
    worker: str,
    lease_seconds: int | None = None,
    max_tasks: int = 1,
    now: int | None = None,
) -> list[Task]:
    """Claim up to `max_tasks` tasks, best first; [] when there is none or the queue is paused."""
    live, now, lease_ms = now is None, now_ms(now), checked_lease_ms(settings, lease_seconds)
    check_worker(worker)
    check_max_tasks(max_tasks)
    if settings.paused:
        return []
    with core.queue_dirs(host, queue, create=True) as qd:
        if settings.limited:
            with gate.ClaimLock(qd, settings, now=now, live=live, fsync=core.fsync,
                             max_tasks=max_tasks, counts=core.dir_counts) as g:  # fmt: skip
                return g.settle(
                    _claim_from(core, qd, worker=worker, lease_ms=lease_ms, max_tasks=g.room,
                                now=g.now, live=live, hold=g.hold, log_read=g.log_read)
                    if g.room else []
                )  # fmt: skip
        return _claim_from(core, qd, worker=worker, lease_ms=lease_ms, max_tasks=max_tasks,
                           now=now, live=live)  # fmt: skip


def _claim_from(
    core: QueueCore,
    qd: QueueDirs,
    *,
    worker: str,
    lease_ms: int,
    max_tasks: int,
    now: int,
    live: bool,
    hold: Callable[[Task], bool] | None = None,
    log_read: bool = False,
) -> list[Task]:
    """Take up to `max_tasks` tasks (each renamed into processing/ under its lock), then write
    their leased records together (core.apply_many: the data fsyncs at once, one fsync of
    processing/, one of the event log), the locks held until they are written."""
    taken: list[tuple[str, int, Change]] = []  # (id, the lock's descriptor, the change)
    busy: list[str] = []
    index = None
    try:
        while len(taken) < max_tasks:
            with core.lock:
                # refreshed once a claim: what arrives after that is the next claim's, and the
                # events of this claim's own renames out of pending/ need no reading
                # (not read again when the flow gate has just read the process's inotify queue)
                index = core.index(qd, read=not log_read) if index is None else index
                task_id = index.take(now)
            if task_id is None:
                break
            try:
                outcome = _take_one(qd, task_id, worker=worker, lease_ms=lease_ms, now=now,
                                    live=live, fsync=core.fsync, hold=hold)  # fmt: skip
            except BaseException:
                with core.lock:  # the file is still pending (the claim put it back): keep it
                    index.give_back(task_id)
                raise
            if isinstance(outcome, tuple):
                taken.append((task_id, *outcome))
                continue  # the id stays taken (counted as pending) until its record is written
            if outcome in ("busy", "held"):  # held by its key: claimed past, a candidate still
                busy.append(task_id)
                continue
            with core.lock:
                index.forget(task_id)
                if outcome == "later":  # pending, not claimable yet: learn its new time
                    index.learn(task_id)
            if outcome == "foreign":
                # moved aside now: the claim goes on whether or not its line is written (the
                # sweep moves it, if this could not)
                with contextlib.suppress(StorageUnavailable):
                    core.quarantine(qd, "pending", task_id, now=now)
        claimed = (
            core.apply_many(
                qd,
                [change for _, _, change in taken],
                now=max(change.new.updated_at for _, _, change in taken),  # rules.claim_stamp
                worker=worker,
                settings=None,
                may_spool=False,  # a claim whose line fails is put back, never spooled
                flush=False,  # a claim lost in a crash is a run again (store.md, fourth version)
            )
            if taken
            else []
        )
    except BaseException as exc:
        # nothing of this claim was acknowledged: every taken task goes back to pending/ as it
        # was, even one whose leased record was written before its event line failed. Not the
        # ones whose `claimed` lines a full disk let through whole before it cut the rest: a
        # reader may have read those lines, so those claims stand, leased to a worker that
        # never heard of them, and the lease pass requeues them (a lost answer, as for any
        # claim). apply_many writes one line per change, in order.
        standing = exc.standing if isinstance(exc, LinesRefused) else 0
        for _, _, change in taken[standing:]:
            _put_back(qd, change.old, fsync=core.fsync)
        if index is not None:
            with core.lock:
                for task_id, _, _ in taken[:standing]:
                    index.forget(task_id)
                for task_id, _, _ in taken[standing:]:
                    index.give_back(task_id)
        raise
    finally:
        for _, fd, _ in taken:
            os.close(fd)
        if busy and index is not None:
            with core.lock:
                for task_id in busy:
                    index.give_back(task_id)
    if index is not None:
        with core.lock:
            for task_id, _, _ in taken:
                index.forget(task_id)
    return claimed


def _take_one(
    qd: QueueDirs,
    task_id: str,
    *,
    worker: str,
    lease_ms: int,
    now: int,
    live: bool,
    fsync: files.Durable,
    hold: Callable[[Task], bool] | None = None,
) -> tuple[int, Change] | str:
    """The claim is an atomic rename that never replaces: exactly one racing claimer wins.
    The winner gets the descriptor that holds the task's lock and the leased record to write;
    the others "gone" (claimed elsewhere, not a task), "busy" (locked), "later" (delayed) or
    "foreign" (a record of another id, host or queue than its place: quarantined)."""
    pending, name = qd.fd("pending"), paths.task_file(task_id)
    try:
        fd = files.lock_at(pending, name, block=False)
    except OSError as exc:
        # claimed by someone else, or not a regular file (the sweep quarantines it); anything
        # else (out of descriptors) is no answer about the task: the caller gives it back
        if files.gone_or_not_a_task_file(exc):
            return "gone"
        raise files.unreadable(exc) from exc
    if fd is None:
        return "busy"
    keep = False
    try:
        try:
            task = copies.parse(files.read_fd(fd))
        except CorruptRecord:
            return "gone"
        except OSError as exc:
            if files.gone_or_not_a_task_file(exc):
                return "gone"
            raise files.unreadable(exc) from exc
        if not copies.belongs(qd, task_id, task):
            return "foreign"
        if task.status is not State.PENDING or task.available_at > now or task.waiting_for:
            return "later" if task.status is State.PENDING else "gone"
        if hold is not None and hold(task):
            return "held"
        try:
            files.rename_noreplace(pending, name, qd.fd("processing"))
        except FileNotFoundError:
            return "gone"  # lost the race
        except FileExistsError:
            return "busy"  # a crash left a copy there: still a candidate once the sweep settles it
        newer = _newer_done(qd, task_id, task.rev)
        if newer:  # an interrupted move to done left this copy behind: it must not run again
            files.unlink(qd.fd("processing"), name, fsync=fsync)
            return "gone"
        stamp = claim_stamp(task, now, live=live)
        new = claimed(task, worker=worker, lease_ms=lease_ms, now=stamp)
        keep = True
        return fd, Change("processing", task, new, "claimed")
    finally:
        if not keep:
            os.close(fd)


def _put_back(qd: QueueDirs, old: Task, *, fsync: files.Durable) -> None:
    """A claim failed after its rename (the leased record's write, or its event line): the
    record as it was before the claim goes back over whatever processing/ holds now, then
    back to pending/, claimable again. A rename back alone would have carried a leased
    record into pending/, where no claim takes it and no lease pass looks."""
    processing, name = qd.fd("processing"), paths.task_file(old.id)
    # what cannot be put back stays in processing/, a pending record or a leased one, and
    # the sweep's lease pass requeues either
    with contextlib.suppress(OSError, StorageUnavailable):
        files.write_durable(processing, name, orjson.dumps(old.to_record()), fsync=fsync)
        files.rename_noreplace(processing, name, qd.fd("pending"))


def _newer_done(qd: QueueDirs, task_id: str, rev: int) -> bool:
    try:
        done = copies.read_copy(qd, "done", task_id)
    except CorruptRecord:
        return False
    return done is not None and done.rev > rev


def wait_claim(
    core: QueueCore,
    host: str,
    queue: str,
    *,
    settings: QueueSettings,
    worker: str,
    wait_seconds: float,
    lease_seconds: int | None = None,
    max_tasks: int = 1,
    still_wanted: Callable[[], bool] | None = None,
) -> list[Task]:
    """Claim, blocking up to `wait_seconds`; wakes as soon as any process posts to the queue.

    `still_wanted`: whether the caller still waits (its client's connection is open), asked
    before each look that could take a task and at least every STILL_WANTED_SECONDS while it
    sleeps: once false, the wait ends with nothing taken."""
    wanted = still_wanted or _always
    deadline = time.monotonic() + max(0.0, float(wait_seconds))
    claim_now = functools.partial(
        claim,
        core,
        host,
        queue,
        settings=settings,
        worker=worker,
        lease_seconds=lease_seconds,
        max_tasks=max_tasks,
    )
    if not wanted():
        return []
    tasks = claim_now()  # the common case under load, which then never touches inotify
    if tasks or wait_seconds <= 0:
        return tasks
    # Held for the wait: the index it asks for the next due task is this queue's.
    # Only this queue's pending/ wakes it: posts, retries and requeues all land there.
    # Only a task file arriving can make a claim succeed: temp files and names leaving (other
    # claims taking theirs) do not wake it, so a post wakes each waiting claim once, not thrice.
    with (
        core.queue_dirs(host, queue, create=True) as qd,
        watcher().channel([qd.proc_path("pending")], arrivals(), wanted=_task_name) as channel,
    ):
        while True:
            generation = channel.generation
            if not wanted():
                return []
            tasks = claim_now()  # again, now watched: a post since the first look wakes no one
            remaining = deadline - time.monotonic()
            if tasks or remaining <= 0:
                return tasks
            with core.lock:
                due = core.index(qd).next_due()
            if due is not None:  # a delayed task becomes claimable before anything is posted
                remaining = min(remaining, max(0.001, due / 1000 - time.time()))
            remaining = min(remaining, limits.recheck_in(tasks))  # a token, or room, comes
            _sleep(channel, generation, remaining, still_wanted)


def _sleep(
    channel: Channel, generation: int, seconds: float, still_wanted: Callable[[], bool] | None
) -> None:
    """channel.wait for `seconds`; with `still_wanted`, ended early once it turns false (asked
    every STILL_WANTED_SECONDS), without looking at the queue in between."""
    if still_wanted is None:
        channel.wait(generation, seconds)
        return
    deadline = time.monotonic() + seconds
    while True:
        channel.wait(generation, min(max(0.0, deadline - time.monotonic()), STILL_WANTED_SECONDS))
        if (
            channel.generation != generation
            or not channel.listening  # a polling channel: the caller looks again, as it asked
            or time.monotonic() >= deadline
            or not still_wanted()
        ):
            return


def _always() -> bool:
    return True


def _task_name(name: str) -> bool:
    return paths.task_id_of(name) is not None


def unclaim(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    now: int | None = None,
) -> Task:
    """Give back a claim whose caller left before it heard of it (rules.plan_unclaim): pending
    again with its attempt uncounted, and claimable at once (a waiting claim wakes for it)."""
    now = now_ms(now)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        change = rules.plan_unclaim(found.task, found.directory, worker, attempt, now=now)
        return core.apply(qd, found.directory, change.old, change.new, change.event, now=now,
                          worker=worker, settings=settings)  # fmt: skip
