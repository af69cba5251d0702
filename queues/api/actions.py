"""One function per endpoint: the caller's rights checked, then the one store call that does it.

Views parse and render; these decide who may, using the QueueContext, and call the store with
the queue's settings. Reading a task to learn whose it is comes first where ownership matters.
"""

import contextlib
from collections.abc import Callable
from typing import Any

from queues import stores
from queues.api import held_threads, sightings
from queues.api.context import QueueContext
from queues.models import Role
from queues.store import (
    ANY,
    GroupView,
    InvalidRequest,
    NotFound,
    OnComplete,
    PostEntry,
    PostResult,
    QueueStats,
    Report,
    Reported,
    StoreError,
    Task,
    TaskPage,
    limits,
    rules,
)
from queues.store.clock import now_ms
from queues.store.records import State
from queues.stores.why import why_pending

PRODUCER, WORKER, OPERATOR = Role.PRODUCER, Role.WORKER, Role.OPERATOR


# the QueueContext of another queue of the same host (context.resolve for the request)
ContextOf = Callable[[str], QueueContext]


def check_after(ctx: QueueContext, after: Any, on_failure: Any, context_of: ContextOf) -> None:
    """Each task a post names in `after` is one the caller may read, as a read of it would
    answer (404 for one that is not there, or not the caller's to see), on the same store as
    the post's queue (a dependency is the store's to follow)."""
    if not after:
        return
    refs = rules.check_after(ctx.queue, after, on_failure) or []
    store = stores.of(ctx.host, ctx.queue)
    for ref in refs:
        queue, task_id = rules.split_ref(ref)
        other = ctx if queue == ctx.queue else context_of(queue)
        if stores.of(ctx.host, queue) is not store:
            raise InvalidRequest(
                f"after names a task of {queue}, a queue on another store than {ctx.queue}'s."
            )
        other.check_visible(store.read(ctx.host, queue, task_id))


def on_complete(
    ctx: QueueContext, spec: tuple[str, Any] | None, context_of: ContextOf
) -> OnComplete | None:
    """The callback of a post that closes a group: into a queue of the host the caller may post
    to (404 for one it may not see, 403 without the role), on the post's store (the ending
    that completes the group posts it). Its settings are that queue's, as they stand now."""
    if spec is None:
        return None
    queue, item = spec
    if not isinstance(queue, str):
        raise InvalidRequest("onComplete's queue must be a queue name.")
    rules.check_group("g", OnComplete(queue=queue, item=item, settings=ctx.settings), ctx.host)
    other = ctx if queue == ctx.queue else context_of(queue)
    if PRODUCER not in other.roles and not other.settings.public_post:
        other.require(PRODUCER)
    if stores.of(ctx.host, queue) is not stores.of(ctx.host, ctx.queue):
        raise InvalidRequest(f"onComplete's queue {queue} is on another store than {ctx.queue}.")
    return OnComplete(queue=queue, item=item, settings=other.settings)


def read_group(ctx: QueueContext, group: str) -> GroupView:
    """A group's progress, for those who may read its tasks: its producer, the queue's
    operators, anyone for a group of public posts; 404 for anyone else, which the store
    decides as it finds no group (another producer's group costs what a missing one does)."""
    seen_by = ANY if ctx.operator else (ctx.caller if PRODUCER in ctx.roles else None)
    return stores.of(ctx.host, ctx.queue).read_group(ctx.host, ctx.queue, group, seen_by=seen_by)


def _posting(
    ctx: QueueContext, on_complete_spec: tuple[str, Any] | None, context_of: ContextOf | None
) -> tuple[OnComplete | None, str | None]:
    """What a post and a batch post settle first: the right to post (none needed on a queue of
    public posts), the callback of a post that closes a group, and whom the tasks are posted by
    (None without the producer role: a public post, postedBy null, its id its only key)."""
    if PRODUCER not in ctx.roles and not ctx.settings.public_post:
        ctx.require(PRODUCER)
    closing = None
    if on_complete_spec is not None:
        assert context_of is not None, "a post with onComplete names another queue"
        closing = on_complete(ctx, on_complete_spec, context_of)
    return closing, (ctx.caller if PRODUCER in ctx.roles else None)


def post(
    ctx: QueueContext,
    item: Any,
    *,
    priority: int,
    delay: int,
    idempotency_key: str | None,
    after: list[str] | None = None,
    on_dependency_failure: str | None = None,
    context_of: ContextOf | None = None,
    concurrency_key: str | None = None,
    group: Any = None,
    on_complete_spec: tuple[str, Any] | None = None,
) -> PostResult:
    closing, posted_by = _posting(ctx, on_complete_spec, context_of)
    if after:
        assert context_of is not None, "a post with after reads other queues' tasks"
        check_after(ctx, after, on_dependency_failure, context_of)
    return stores.of(ctx.host, ctx.queue).post(
        ctx.host,
        ctx.queue,
        item,
        settings=ctx.settings,
        posted_by=posted_by,
        priority=priority,
        delay_seconds=delay,
        idempotency_key=idempotency_key,
        after=after,
        on_dependency_failure=on_dependency_failure,
        concurrency_key=concurrency_key,
        group=group,
        on_complete=closing,
    )


def post_many(
    ctx: QueueContext,
    entries: list[PostEntry],
    *,
    context_of: ContextOf | None = None,
    group: Any = None,
    on_complete_spec: tuple[str, Any] | None = None,
) -> list[PostResult]:
    """A batch post, under the same rights as one post (a public queue's batch is public)."""
    closing, posted_by = _posting(ctx, on_complete_spec, context_of)
    for index, entry in enumerate(entries):
        if entry.after:
            assert context_of is not None, "a post with after reads other queues' tasks"
            try:
                check_after(ctx, list(entry.after), entry.on_dependency_failure, context_of)
            except StoreError as exc:
                raise exc.at(index) from exc
    return stores.of(ctx.host, ctx.queue).post_many(
        ctx.host,
        ctx.queue,
        entries,
        settings=ctx.settings,
        posted_by=posted_by,
        group=group,
        on_complete=closing,
    )


def read(ctx: QueueContext, task_id: str, *, wait: float = 0, since: int | None = None) -> Task:
    """The status of a task the caller may see; a waiting read holds until it changes."""
    store = stores.of(ctx.host, ctx.queue)
    task = ctx.check_visible(store.read(ctx.host, ctx.queue, task_id))
    since = task.updated_at if since is None else since
    if wait > 0 and task.updated_at == since:  # changed already: nothing to wait for
        with held_threads.slot() as may_wait:
            if may_wait:
                task = store.wait_for_change(
                    ctx.host, ctx.queue, task_id, since=since, wait_seconds=wait
                )
    if task.status.terminal and task.fetched_at is None and ctx.stamps_fetch(task):
        task = store.fetch(ctx.host, ctx.queue, task_id, current=task)
    return task


def held_by(ctx: QueueContext, task: Task) -> str | None:
    """What holds a pending task back now (the queue's flow limits), or None."""
    if task.status is not State.PENDING or not ctx.settings.limited:
        return None
    store = stores.of(ctx.host, ctx.queue)
    now = now_ms(None)
    state = store.flow_state(ctx.host, ctx.queue, settings=ctx.settings, now=now)
    return limits.held_reason(state, ctx.settings, task, now)


def why(ctx: QueueContext, task: Task) -> str | None:
    """Why a pending task is not running, in one line (stores/why.py); None for any other."""
    if task.status is not State.PENDING:
        return None
    return why_pending(task, ctx.settings, now=now_ms(None))


def list_tasks(ctx: QueueContext, *, status: str | None, limit: int, offset: int) -> TaskPage:
    ctx.require(PRODUCER, OPERATOR)
    posted_by = ANY if ctx.operator else ctx.caller
    try:
        return stores.of(ctx.host, ctx.queue).list_tasks(
            ctx.host, ctx.queue, status=status, posted_by=posted_by, limit=limit, offset=offset
        )
    except NotFound:  # a configured queue nobody has posted to has no directory yet
        return TaskPage(count=0, tasks=[])


def stats(ctx: QueueContext) -> QueueStats:
    """Counts of the whole queue: for anyone holding a role on it (no task is shown)."""
    ctx.require(PRODUCER, WORKER, OPERATOR)
    try:
        return stores.of(ctx.host, ctx.queue).stats(ctx.host, ctx.queue)
    except NotFound:  # a configured queue nobody has posted to has no directory yet
        return QueueStats(pending=0, processing=0, done=0, delayed=0, retrying=0,
                          oldest_pending_ms=0)  # fmt: skip


def _own_task(ctx: QueueContext, task_id: str) -> None:
    """Cancel and retry are for the task's producer or an operator, never the public."""
    ctx.require(PRODUCER, OPERATOR)
    task = stores.of(ctx.host, ctx.queue).read(ctx.host, ctx.queue, task_id)
    if not (ctx.operator or (task.posted_by is not None and task.posted_by == ctx.caller)):
        raise NotFound()


def cancel(ctx: QueueContext, task_id: str) -> Task:
    _own_task(ctx, task_id)
    return stores.of(ctx.host, ctx.queue).cancel(
        ctx.host, ctx.queue, task_id, settings=ctx.settings
    )


def retry(ctx: QueueContext, task_id: str) -> Task:
    _own_task(ctx, task_id)
    return stores.of(ctx.host, ctx.queue).retry(ctx.host, ctx.queue, task_id, settings=ctx.settings)


def hasten(ctx: QueueContext, task_id: str) -> Task:
    """An operator's "retry now": a task waiting out its backoff or delay, claimable now (the
    operator's name goes on the line)."""
    ctx.require(OPERATOR)
    return stores.of(ctx.host, ctx.queue).hasten(
        ctx.host, ctx.queue, task_id, settings=ctx.settings, by=ctx.caller
    )


def claim(
    ctx: QueueContext,
    *,
    worker: str,
    wait: float,
    lease: int | None,
    max_tasks: int,
    connected: Callable[[], bool] = lambda: True,
) -> tuple[list[Task], bool]:
    """The claimed tasks, and whether the process was too crowded to let this claim wait.

    `connected`: whether the client is still there to hear the answer (client_socket). A
    waiting claim asks it before each look that could take a task, and ends once it is
    false; a claim that took tasks as its client left gives them back at once, their
    attempts uncounted (`unclaimed`), and answers nothing."""
    ctx.require(WORKER)
    sightings.saw(ctx.host, ctx.queue, worker)  # a claim that finds nothing writes no event
    store = stores.of(ctx.host, ctx.queue)
    options = {
        "settings": ctx.settings,
        "worker": worker,
        "lease_seconds": lease,
        "max_tasks": max_tasks,
    }
    crowded = False
    if wait <= 0:
        tasks = store.claim(ctx.host, ctx.queue, **options)
    else:
        with held_threads.slot() as may_wait:
            if may_wait:
                tasks = store.wait_claim(ctx.host, ctx.queue, wait_seconds=wait,
                                         still_wanted=connected, **options)  # fmt: skip
            else:
                crowded = True
        if crowded:
            tasks = store.claim(ctx.host, ctx.queue, **options)
    if tasks and not connected():
        for task in tasks:
            # one that cannot be given back (the store is down) comes back as any claim whose
            # answer was lost: when its lease lapses
            with contextlib.suppress(StoreError):
                store.unclaim(ctx.host, ctx.queue, task.id, settings=ctx.settings,
                              worker=worker, attempt=task.attempts)  # fmt: skip
        return [], crowded
    return tasks, crowded


def progress(ctx: QueueContext, task_id: str, *, worker: str, attempt: int, progress: Any) -> Task:
    ctx.require(WORKER)
    return stores.of(ctx.host, ctx.queue).progress(
        ctx.host,
        ctx.queue,
        task_id,
        settings=ctx.settings,
        worker=worker,
        attempt=attempt,
        progress=progress,
    )


def finish(ctx: QueueContext, task_id: str, *, worker: str, attempt: int, result: Any) -> Reported:
    ctx.require(WORKER)
    return stores.of(ctx.host, ctx.queue).finish(
        ctx.host,
        ctx.queue,
        task_id,
        settings=ctx.settings,
        worker=worker,
        attempt=attempt,
        result=result,
    )


def fail(
    ctx: QueueContext,
    task_id: str,
    *,
    worker: str,
    attempt: int,
    result: Any,
    retry: bool,
    cancelled: bool,
) -> Reported:
    ctx.require(WORKER)
    return stores.of(ctx.host, ctx.queue).fail(
        ctx.host,
        ctx.queue,
        task_id,
        settings=ctx.settings,
        worker=worker,
        attempt=attempt,
        result=result,
        retry=retry,
        cancelled=cancelled,
    )


def finish_many(
    ctx: QueueContext, reports: list[Report], *, worker: str
) -> list[Reported | StoreError]:
    ctx.require(WORKER)
    return stores.of(ctx.host, ctx.queue).finish_many(
        ctx.host, ctx.queue, reports, settings=ctx.settings, worker=worker
    )
