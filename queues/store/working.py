"""The worker's verbs on a claimed task: progress, finish, fail. Each is fenced: only the worker
and attempt the claim named may change the task. A finish or fail that the record shows was
already made, by the same worker for the same attempt with the same body, is answered as a
replay (a worker repeating a report whose answer it lost) instead of as a lost lease."""

from __future__ import annotations

import contextlib
from typing import Any

from . import batch, copies, paths, rules
from .batch import Report
from .clock import now_ms
from .core import QueueCore
from .errors import InvalidRequest, LeaseLost, NotFound, StoreError
from .paths import QueueDirs
from .posting import check_size
from .records import Task
from .results import Reported
from .rules import Change, checked_lease_ms
from .settings import QueueSettings


def progress(
    core: QueueCore,
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
    """Record progress (optional) and extend the lease by the claim's lease length.

    Without a progress body this is a heartbeat: the record is rewritten with the new lease,
    but no event line and no archive line are written (a worker beats every lease/3 seconds,
    and a long task's history would be nothing but beats)."""
    now = now_ms(now)
    if lease_seconds is not None:
        checked_lease_ms(settings, lease_seconds)  # refuse a bad value before touching anything
    if progress is not None:
        check_size("progress", progress, settings)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        task = found.task
        new = rules.progressed(
            task, settings=settings, worker=worker, attempt=attempt, progress=progress,
            lease_seconds=lease_seconds, now=now,
        )  # fmt: skip
        body = {"progress": progress} if progress is not None else {}
        return core.apply(
            qd,
            found.directory,
            task,
            new,
            "progress" if progress is not None else None,
            now=now,
            worker=worker,
            archive=body,
            settings=settings,
        )


def finish(
    core: QueueCore,
    host: str,
    queue: str,
    task_id: str,
    *,
    settings: QueueSettings,
    worker: str,
    attempt: int,
    result: Any,
    now: int | None = None,
) -> Reported:
    """Finished with `result`; the same result again from the same worker and attempt is a
    replay that changes nothing."""
    now = now_ms(now)
    check_size("result", result, settings)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        planned = rules.plan_finish(found.task, found.directory, worker, attempt, result, now=now)
        return _apply_one(core, qd, planned, now=now, worker=worker, settings=settings)


def fail(
    core: QueueCore,
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
) -> Reported:
    """Failed; with `retry` and budget left, back to pending after the backoff; with `cancelled`
    on a task whose cancel was requested, cancelled. The same fail again from the same worker
    and attempt, while the record still shows its outcome, is a replay that changes nothing.

    The backoff's requeue starts a fresh queue-timeout window (requeuedAt) when the task has an
    attempt budget; without one, fail(retry) may requeue forever, and the queue timeout counted
    from the last post or operator's retry stays the one bound on it."""
    now = now_ms(now)
    if result is not None:
        check_size("result", result, settings)
    with (
        core.queue_dirs(host, queue) as qd,
        copies.locked(qd, paths.validate_task_id(task_id)) as found,
    ):
        planned = rules.plan_fail(
            found.task, found.directory, worker, attempt, result, retry=retry, cancelled=cancelled,
            settings=settings, now=now,
        )  # fmt: skip
        return _apply_one(core, qd, planned, now=now, worker=worker, settings=settings)


def finish_many(
    core: QueueCore,
    host: str,
    queue: str,
    reports: list[Report],
    *,
    settings: QueueSettings,
    worker: str,
    now: int | None = None,
) -> list[Reported | StoreError]:
    """The outcomes of up to 100 claimed tasks in one call, each answered on its own: a
    Reported, or the refusal of that entry alone (lease_lost for a lapsed lease or a task in
    another state, not_found, payload_too_large...). The changes share one fsync per directory
    and one of the event log; all are durable before this returns.

    Refused whole (InvalidRequest naming the index): an empty or oversized batch, or one task
    reported twice. Every task is locked for the writes, in id order, so that two batches
    naming the same tasks cannot wait on each other."""
    now = now_ms(now)
    batch.check_size(reports, "outcomes")
    repeat = batch.first_repeat([report.task_id for report in reports])
    if repeat is not None:
        raise InvalidRequest("The batch reports one task twice.").at(repeat)
    answers: list[Reported | StoreError | None] = [None] * len(reports)
    for index, report in enumerate(reports):
        try:
            paths.validate_task_id(report.task_id)
            if report.outcome == "result" or report.result is not None:
                check_size("result", report.result, settings)
        except StoreError as exc:
            answers[index] = exc.at(index)
    with core.queue_dirs(host, queue) as qd, contextlib.ExitStack() as locks:
        changes: list[tuple[int, Change]] = []
        order = sorted(range(len(reports)), key=lambda i: reports[i].task_id)
        for index in order:
            if answers[index] is not None:
                continue
            report = reports[index]
            try:
                found = locks.enter_context(copies.locked(qd, report.task_id))
                planned = rules.plan_report(
                    found.task, found.directory, worker, report, settings=settings, now=now
                )
            except (NotFound, LeaseLost, InvalidRequest) as exc:
                answers[index] = exc.at(index)
                continue
            if isinstance(planned, Reported):
                answers[index] = planned
            else:
                changes.append((index, planned))
        changes.sort()  # written (and logged) in the order of the entries
        done = core.apply_many(
            qd, [change for _, change in changes], now=now, worker=worker, settings=settings
        )
    for (index, _), task in zip(changes, done, strict=True):
        answers[index] = Reported(task=task, replayed=False)
    assert all(answer is not None for answer in answers)
    return answers  # type: ignore[return-value]


def _apply_one(
    core: QueueCore,
    qd: QueueDirs,
    planned: Change | Reported,
    *,
    now: int,
    worker: str,
    settings: QueueSettings,
) -> Reported:
    if isinstance(planned, Reported):
        return planned
    ended = core.apply(
        qd,
        planned.source,
        planned.old,
        planned.new,
        planned.event,
        now=now,
        worker=worker,
        archive=planned.archive,
        settings=settings,
    )
    return Reported(task=ended, replayed=False)
