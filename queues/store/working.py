"""The worker's verbs: claim, progress, finish, fail. Bound as methods of QueueStore."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from typing import TYPE_CHECKING, Any

from . import copies, files, paths
from .clock import now_ms
from .errors import CorruptRecord, InvalidRequest, LeaseLost, StorageUnavailable, out_of_range
from .paths import QueueDirs
from .posting import check_size
from .records import Lease, State, Task
from .settings import QueueSettings
from .waiting import arrivals, watcher

if TYPE_CHECKING:
    from .store import QueueStore


def _lease_ms(settings: QueueSettings, lease_seconds: int | None) -> int:
    seconds = settings.lease_seconds if lease_seconds is None else lease_seconds
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int)
        or not 1 <= seconds <= settings.queue_seconds
    ):
        raise out_of_range("lease", seconds, 1, settings.queue_seconds, unit="seconds")
    return seconds * 1000


def _claimed_ms(task: Task, settings: QueueSettings) -> int:
    """The claim's own lease length; the queue's for a record written before it was kept.

    Clamped to the queue timeout, which an admin may have lowered since the claim."""
    seconds = task.lease_seconds or settings.lease_seconds
    return min(seconds, settings.queue_seconds) * 1000


def _check_worker(worker: Any) -> str:
    if not isinstance(worker, str) or not 1 <= len(worker) <= 200:
        raise InvalidRequest("worker must be a name of 1 to 200 characters.")
    return worker


def claim(
    self: QueueStore,
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
    now, lease_ms = now_ms(now), _lease_ms(settings, lease_seconds)
    _check_worker(worker)
    if isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or not 1 <= max_tasks <= 100:
        raise out_of_range("max", max_tasks, 1, 100)
    if settings.paused:
        return []
    qd = self.dirs(host, queue, create=True)
    claimed: list[Task] = []
    busy: list[str] = []
    while len(claimed) < max_tasks:
        with self.lock:
            index = self.index(qd)
            task_id = index.take(now)
        if task_id is None:
            break
        try:
            outcome = _claim_one(self, qd, task_id, worker=worker, lease_ms=lease_ms, now=now)
        except BaseException:
            with self.lock:  # the file is still pending (the claim put it back): keep it
                index.give_back(task_id)
            raise
        if outcome == "busy":
            busy.append(task_id)
        elif isinstance(outcome, Task):
            claimed.append(outcome)
        with self.lock:
            if outcome == "busy":
                continue
            if isinstance(outcome, Task) or outcome == "gone":
                index.forget(task_id)
            else:  # "later": pending still, but not claimable yet (the index learns its new time)
                index.forget(task_id)
                index.learn(task_id)
    with self.lock:
        for task_id in busy:
            index.give_back(task_id)
    return claimed


def _claim_one(
    self: QueueStore, qd: QueueDirs, task_id: str, *, worker: str, lease_ms: int, now: int
) -> Task | str:
    """The claim is an atomic rename that never replaces: exactly one racing claimer wins."""
    pending, name = qd.fd("pending"), paths.task_file(task_id)
    try:
        fd = files.lock_at(pending, name, block=False)
    except OSError:
        return "gone"  # claimed by someone else, or not a regular file (the sweep quarantines)
    if fd is None:
        return "busy"
    try:
        try:
            task = copies.parse(files.read_fd(fd))
        except CorruptRecord:
            return "gone"
        if task.status is not State.PENDING or task.available_at > now:
            return "later" if task.status is State.PENDING else "gone"
        try:
            files.rename_noreplace(pending, name, qd.fd("processing"))
        except FileNotFoundError:
            return "gone"  # lost the race
        except FileExistsError:
            return "busy"  # a crash left a copy there: still a candidate once the sweep settles it
        newer = _newer_done(qd, task_id, task.rev)
        if newer:  # an interrupted move to done left this copy behind: it must not run again
            files.unlink(qd.fd("processing"), name, fsync=self.fsync)
            return "gone"
        new = task.replace(
            status=State.PROCESSING,
            attempts=task.attempts + 1,
            lease=Lease(worker=worker, until=now + lease_ms),
            lease_seconds=lease_ms // 1000,
            updated_at=now,
        )
        try:
            return self.apply(qd, "processing", task, new, "claimed", now=now, worker=worker)
        except StorageUnavailable:
            _undo_rename(qd, name)
            raise
    finally:
        os.close(fd)


def _undo_rename(qd: QueueDirs, name: str) -> None:
    """The rewrite failed: put the untouched record back, so the old state stays visible."""
    with contextlib.suppress(OSError, StorageUnavailable):  # else the sweep requeues it
        files.rename_noreplace(qd.fd("processing"), name, qd.fd("pending"))


def _newer_done(qd: QueueDirs, task_id: str, rev: int) -> bool:
    try:
        done = copies.read_copy(qd, "done", task_id)
    except CorruptRecord:
        return False
    return done is not None and done.rev > rev


def wait_claim(
    self: QueueStore,
    host: str,
    queue: str,
    *,
    settings: QueueSettings,
    worker: str,
    wait_seconds: float,
    lease_seconds: int | None = None,
    max_tasks: int = 1,
) -> list[Task]:
    """Claim, blocking up to `wait_seconds`; wakes as soon as any process posts to the queue."""
    deadline = time.monotonic() + max(0.0, float(wait_seconds))
    claim = functools.partial(
        self.claim,
        host,
        queue,
        settings=settings,
        worker=worker,
        lease_seconds=lease_seconds,
        max_tasks=max_tasks,
    )
    tasks = claim()  # the common case under load, which then never touches inotify
    if tasks or wait_seconds <= 0:
        return tasks
    qd = self.dirs(host, queue, create=True)
    # Only this queue's pending/ wakes it: posts, retries and requeues all land there.
    # Only a task file arriving can make a claim succeed: temp files and names leaving (other
    # claims taking theirs) do not wake it, so a post wakes each waiting claim once, not thrice.
    with watcher().channel([qd.proc_path("pending")], arrivals(), wanted=_task_name) as channel:
        while True:
            generation = channel.generation
            tasks = claim()  # again, now watched: a post since the first look wakes no one
            remaining = deadline - time.monotonic()
            if tasks or remaining <= 0:
                return tasks
            with self.lock:
                due = self.index(qd).next_due()
            if due is not None:  # a delayed task becomes claimable before anything is posted
                remaining = min(remaining, max(0.001, due / 1000 - time.time()))
            channel.wait(generation, remaining)


def _task_name(name: str) -> bool:
    return paths.task_id_of(name) is not None


def _held(task: Task, worker: str, attempt: int) -> None:
    """Fencing: only the worker and attempt the claim named may change a processing task."""
    lease = task.lease
    if (
        task.status is not State.PROCESSING
        or lease is None
        or lease.worker != worker
        or task.attempts != attempt
    ):
        raise LeaseLost()


def progress(
    self: QueueStore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    progress: Any = None,
    lease_seconds: int | None = None,
    now: int | None = None,
) -> Task:
    """Record progress (optional) and extend the lease by the claim's lease length."""
    now = now_ms(now)
    if lease_seconds is not None:
        _lease_ms(settings, lease_seconds)  # refuse a bad value before touching anything
    if progress is not None:
        check_size("progress", progress, settings)
    qd = self.dirs(host, queue)
    with copies.locked(qd, paths.validate_task_id(task_id)) as found:
        task = found.task
        _held(task, worker, attempt)
        lease_ms = (
            _lease_ms(settings, lease_seconds) if lease_seconds else _claimed_ms(task, settings)
        )
        changes: dict[str, Any] = {
            "lease": Lease(worker=worker, until=now + lease_ms),
            "updated_at": now,
        }
        if progress is not None:
            changes["progress"] = progress
        new = task.replace(**changes)
        body = {"progress": progress} if progress is not None else {}
        return self.apply(
            qd,
            found.directory,
            task,
            new,
            "progress",
            now=now,
            worker=worker,
            archive=body,
            settings=settings,
        )


def finish(
    self: QueueStore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    result: Any,
    now: int | None = None,
) -> Task:
    now = now_ms(now)
    check_size("result", result, settings)
    qd = self.dirs(host, queue)
    with copies.locked(qd, paths.validate_task_id(task_id)) as found:
        task = found.task
        _held(task, worker, attempt)
        new = task.replace(
            status=State.FINISHED, result=result, lease=None, updated_at=now, finished_at=now
        )
        return self.apply(
            qd,
            found.directory,
            task,
            new,
            "result",
            now=now,
            worker=worker,
            archive={"result": result},
            settings=settings,
        )


def fail(
    self: QueueStore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    result: Any = None,
    retry: bool = False,
    cancelled: bool = False,
    now: int | None = None,
) -> Task:
    """Failed; with `retry` and budget left, back to pending after the backoff; with `cancelled`
    on a task whose cancel was requested, cancelled."""
    now = now_ms(now)
    if result is not None:
        check_size("result", result, settings)
    qd = self.dirs(host, queue)
    with copies.locked(qd, paths.validate_task_id(task_id)) as found:
        task = found.task
        _held(task, worker, attempt)
        end = {"lease": None, "updated_at": now}
        if cancelled:
            if not task.cancel_requested:
                raise InvalidRequest("Only a task whose cancel was requested can end cancelled.")
            new = task.replace(status=State.CANCELLED, result=result, finished_at=now, **end)
            event = "cancelled"
        elif (
            retry
            and not task.cancel_requested
            and (not task.max_attempts or task.attempts < task.max_attempts)
        ):
            new = task.replace(
                status=State.PENDING,
                last_error=result,
                progress=None,
                available_at=now + settings.backoff_ms(task.attempts),
                **end,
            )
            event = "requeue"
        else:
            error = (
                "attempts" if retry and task.max_attempts and not task.cancel_requested else None
            )
            new = task.replace(
                status=State.FAILED, result=result, error=error, finished_at=now, **end
            )
            event = "failed"
        body = {"result": result} if result is not None else {}
        if new.error:
            body["error"] = new.error
        return self.apply(
            qd,
            found.directory,
            task,
            new,
            event,
            now=now,
            worker=worker,
            archive=body,
            settings=settings,
        )
