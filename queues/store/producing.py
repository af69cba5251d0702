"""The producer's verbs: post a task (or a batch), read it, fetch its result, wait for a change."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from . import batch, copies, dependencies, groups, paths, posting, rules, sequence
from .batch import OnComplete, PostEntry
from .clock import now_ms
from .core import QueueCore
from .errors import InvalidRequest, StoreError
from .eventlog import NO_REASON, Because
from .files import Durable
from .inotify import arrivals, watcher
from .paths import QueueDirs
from .records import Task
from .results import PostResult
from .settings import QueueSettings


def post(
    core: QueueCore,
    host: str,
    queue: str,
    item: Any,
    *,
    settings: QueueSettings,
    posted_by: str | None,
    priority: int = 0,
    delay_seconds: int = 0,
    idempotency_key: str | None = None,
    now: int | None = None,
    reposted_from: str | None = None,
    because: Because = NO_REASON,
    after: list[str] | None = None,
    on_dependency_failure: str | None = None,
    concurrency_key: str | None = None,
    group: str | None = None,
    on_complete: OnComplete | None = None,
) -> PostResult:
    now = now_ms(now)
    group = rules.check_group(group, on_complete, host)
    entry = PostEntry(
        item=item,
        priority=priority,
        delay_seconds=delay_seconds,
        idempotency_key=idempotency_key,
        after=tuple(after or ()),
        on_dependency_failure=on_dependency_failure,
        concurrency_key=concurrency_key,
    )
    task = rules.new_task(host, queue, entry, settings=settings, posted_by=posted_by, now=now,
                     reposted_from=reposted_from, group=group)  # fmt: skip
    task = dependencies.prepare(core, task)
    with (
        core.queue_dirs(host, queue, create=True) as qd,
        _members(
            core, qd, [task], on_complete=on_complete, posted_by=posted_by, now=now
        ) as written,
    ):
        if not settings.max_pending:
            [task] = _numbered(qd, [task], now)
            prior = core.admit(qd, task, now=now, settings=settings, because=because)
        else:
            with posting.posts_locked(qd):
                # a replay answers its first task whatever the queue's depth: it adds nothing
                prior = (
                    posting.replay_of(qd, task, fsync=core.fsync)
                    if task.idempotency_key is not None
                    else None
                )
                if prior is None:
                    with core.lock:
                        posting.check_room(core.pending_count(qd), settings)
                    [task] = _numbered(qd, [task], now)
                    prior = core.admit(qd, task, now=now, settings=settings, because=because)
        written.extend([] if prior is not None else [task.id])
    if prior is not None:
        return PostResult(task=prior, replayed=True)
    if task.waiting_for:
        dependencies.settle_new(core, task, now=now)
    return PostResult(task=task, replayed=False)


def post_many(
    core: QueueCore,
    host: str,
    queue: str,
    entries: list[PostEntry],
    *,
    settings: QueueSettings,
    posted_by: str | None,
    now: int | None = None,
    group: str | None = None,
    on_complete: OnComplete | None = None,
) -> list[PostResult]:
    """Post up to 100 tasks in one call, all or nothing as far as checks go: every entry is
    checked before any is written, and a refusal names the entry (StoreError.index). Every task
    is durable before this returns; the answers are in the order of the entries.

    Two entries with one Idempotency-Key are refused (the second one's index): within one
    batch the second could only be a replay of the first, which is a client's bug."""
    now = now_ms(now)
    batch.check_size(entries, "tasks")
    repeat = batch.first_repeat([entry.idempotency_key for entry in entries])
    if repeat is not None:
        raise InvalidRequest(
            "Two entries of the batch have the same Idempotency-Key; each key may be used once."
        ).at(repeat)
    group = rules.check_group(group, on_complete, host)
    tasks = []
    for index, entry in enumerate(entries):
        try:
            tasks.append(
                rules.new_task(
                    host, queue, entry, settings=settings, posted_by=posted_by, now=now, group=group
                )
            )
        except StoreError as exc:
            raise exc.at(index) from exc
    for index, task in enumerate(tasks):
        try:
            tasks[index] = dependencies.prepare(core, task)
        except StoreError as exc:
            raise exc.at(index) from exc
    with (
        core.queue_dirs(host, queue, create=True) as qd,
        _members(core, qd, tasks, on_complete=on_complete, posted_by=posted_by, now=now) as written,
    ):
        if not settings.max_pending:
            tasks = _numbered(qd, tasks, now)
            priors = core.admit_many(qd, tasks, now=now, settings=settings)
        else:
            with posting.posts_locked(qd):
                adding = len(tasks) - _replays(qd, tasks, fsync=core.fsync)
                if adding:
                    with core.lock:
                        posting.check_room(core.pending_count(qd), settings, adding=adding)
                tasks = _numbered(qd, tasks, now)
                priors = core.admit_many(qd, tasks, now=now, settings=settings)
        written.extend(t.id for t, prior in zip(tasks, priors, strict=True) if prior is None)
    for task, prior in zip(tasks, priors, strict=True):
        if prior is None and task.waiting_for:
            dependencies.settle_new(core, task, now=now)
    return [
        PostResult(task=task, replayed=False)
        if prior is None
        else PostResult(task=prior, replayed=True)
        for task, prior in zip(tasks, priors, strict=True)
    ]


@contextlib.contextmanager
def _members(
    core: QueueCore,
    qd: QueueDirs,
    tasks: list[Task],
    *,
    on_complete: OnComplete | None,
    posted_by: str | None,
    now: int,
) -> Iterator[list[str]]:
    """A grouped post's tasks registered in their group before the block writes them (the
    block lists the ids it wrote); those it did not write (a replay, a refusal) are taken
    back after it. A replay of a key used before registers nothing: its group may be closed."""
    group = tasks[0].group
    if group is None:
        yield []
        return
    new = [t for t in tasks if t.idempotency_key is None
           or posting.replay_of(qd, t, fsync=core.fsync) is None]  # fmt: skip
    if new:
        groups.register(core, qd, group, new, on_complete=on_complete, posted_by=posted_by,
                        now=now)  # fmt: skip
    closing = on_complete is not None and bool(new)
    written: list[str] = []
    stood = False
    try:
        yield written
        stood = bool(written)
    finally:
        unwritten = [t.id for t in new if t.id not in set(written)]
        if unwritten or (closing and not stood):
            # a refused closing post closes nothing; what fails here the sweep's recount
            # counts as gone (and a `closing` left, as its crash's)
            with contextlib.suppress(OSError, StoreError):
                groups.unregister(core, qd, group, unwritten, closing=closing and not stood,
                                  now=now)  # fmt: skip
        if closing and stood:
            # the post stands whatever this meets: a `closing` it leaves, the sweep closes
            with contextlib.suppress(OSError, StoreError):
                groups.close(core, qd, group, now=now)


def _replays(qd: QueueDirs, tasks: list[Task], *, fsync: Durable) -> int:
    """How many of a batch's entries replay a key already used (they need no room); a key
    used with another item refuses the batch, naming the entry."""
    replays = 0
    for index, task in enumerate(tasks):
        if task.idempotency_key is None:
            continue
        try:
            replays += posting.replay_of(qd, task, fsync=fsync) is not None
        except StoreError as exc:
            raise exc.at(index) from exc
    return replays


def _numbered(qd: QueueDirs, tasks: list[Task], now: int) -> list[Task]:
    """The tasks with their post sequence numbers, in the order given (sequence.py)."""
    first = sequence.draw(qd, len(tasks), posted_at=now)
    return [task.numbered(first + n) for n, task in enumerate(tasks)]


def read(core: QueueCore, host: str, queue: str, task_id: str) -> Task:
    """The task as it stands (the highest rev of its copies). Never stamps anything."""
    paths.validate_task_id(task_id)
    with core.queue_dirs(host, queue) as qd:
        return copies.winner(qd, task_id).task


def fetch(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    now: int | None = None,
    current: Task | None = None,
) -> Task:
    """The producer's read: the first read of a terminal result sets fetchedAt.

    `current`: the task as the caller has just read it, which spares a second read of
    every copy; the stamp itself still re-reads the record under its lock."""
    task = read(core, host, queue, task_id) if current is None else current
    if not task.status.terminal or task.fetched_at is not None:
        return task
    now = now_ms(now)
    with core.queue_dirs(host, queue) as qd, copies.locked(qd, task_id) as found:
        task = found.task
        if not task.status.terminal or task.fetched_at is not None:
            return task  # someone else stamped (or retried) it first
        new = task.replace(fetched_at=now)
        return core.apply(qd, found.directory, task, new, "fetched", now=now)


def wait_for_change(
    core: QueueCore, host: str, queue: str, task_id: str, *, since: int, wait_seconds: float
) -> Task:
    """Return as soon as the task's updatedAt differs from `since`, or when the wait ends."""
    # Held for the wait: its reads use the directories, and the watches are made from them.
    with core.queue_dirs(host, queue) as qd:
        # Every change of state renames the task's file into one of its queue's state dirs.
        # (A task deleted meanwhile, by retention, is answered when the wait ends: not found.)
        dirs = [qd.proc_path(directory) for directory in paths.STATE_DIRS]
        return _wait(core, host, queue, task_id, dirs, since=since, wait_seconds=wait_seconds)


def _wait(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    dirs: list[str],
    *,
    since: int,
    wait_seconds: float,
) -> Task:
    # Only this task's own name: every other task's transition in the queue used to wake
    # each waiting read into a read of all its copies.
    name = paths.task_file(task_id)
    deadline = time.monotonic() + wait_seconds
    with watcher().channel(dirs, arrivals(), wanted=name.__eq__) as channel:
        while True:
            generation = channel.generation
            task = read(core, host, queue, task_id)
            remaining = deadline - time.monotonic()
            if task.updated_at != since or remaining <= 0:
                return task
            channel.wait(generation, remaining)
