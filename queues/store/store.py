"""QueueStore: the store's public face. Each method delegates to the module that holds the verb.

- producing: post, post_many, read, fetch, wait_for_change
- operating: cancel, retry, requeue, delete, repost
- claiming: claim, wait_claim, unclaim
- working: progress, finish, finish_many, fail
- listing: list_tasks, stats
- selecting: find, state_counts (the console's queue page)
- sweep: sweep_queue, sweep_all, preview_sweep (module-level functions here, taking the store;
  sweep_queue and preview_sweep methods too, as TaskStore asks)

What they share (directories, pending indexes, the lock, the event log, and `apply`, the one
place a record is written and logged) is the QueueCore in core.py.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from . import (
    claiming,
    gate,
    groups,
    listing,
    operating,
    producing,
    selecting,
    sweep,
    sweep_preview,
    working,
)
from .batch import OnComplete, PostEntry, Report
from .clock import now_ms
from .core import QueueCore
from .errors import NotFound, StoreError
from .interface import TaskStore
from .limits import FlowState
from .paths import QueueDirs
from .records import Task
from .results import ANY, GroupView, PostResult, QueueStats, Reported, TaskPage, _Any
from .selecting import Found, OrderKey, Selection, StateCounts
from .settings import QueueSettings, StoreConfig
from .sweep import SweepReport
from .sweep_preview import SweepPreview


class QueueStore:
    def __init__(self, config: StoreConfig) -> None:
        self.core = QueueCore(config)

    @property
    def config(self) -> StoreConfig:
        return self.core.config

    def close(self) -> None:
        self.core.close()

    def wait_releases(self, timeout: float | None = None) -> bool:
        """Block until the releases of dependents this process's endings handed on are done
        (dependencies.RELEASE_STEP); whether they are. For tests and benchmarks: a server
        never waits for them."""
        return self.core.releases.wait(timeout)

    def queue_dirs(
        self, host: str, queue: str, *, create: bool = False
    ) -> AbstractContextManager[QueueDirs]:
        """A queue's directories, held open for the block (core.QueueCore.queue_dirs)."""
        return self.core.queue_dirs(host, queue, create=create)

    def create_queue(self, host: str, queue: str) -> None:
        """Make a queue's directories now (a post or a claim makes them too)."""
        with self.core.queue_dirs(host, queue, create=True):
            pass

    def queues(self) -> list[tuple[str, str]]:
        return self.core.queues()

    def holds_queue(self, host: str, queue: str) -> bool:
        """Whether this machine has the queue's directories: a file queue is served only where
        they are (its first post or claim there makes them), so the sweep's schedules and
        alerts act on it there alone, and never make them on another machine."""
        try:
            with self.core.queue_dirs(host, queue):
                return True
        except NotFound:
            return False

    # -- producers --------------------------------------------------------------------------

    def post(
        self,
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
        after: list[str] | None = None,
        on_dependency_failure: str | None = None,
        concurrency_key: str | None = None,
        group: str | None = None,
        on_complete: OnComplete | None = None,
    ) -> PostResult:
        return producing.post(
            self.core,
            host,
            queue,
            item,
            settings=settings,
            posted_by=posted_by,
            priority=priority,
            delay_seconds=delay_seconds,
            idempotency_key=idempotency_key,
            now=now,
            after=after,
            on_dependency_failure=on_dependency_failure,
            concurrency_key=concurrency_key,
            group=group,
            on_complete=on_complete,
        )

    def post_many(
        self,
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
        return producing.post_many(
            self.core,
            host,
            queue,
            entries,
            settings=settings,
            posted_by=posted_by,
            now=now,
            group=group,
            on_complete=on_complete,
        )

    def read(self, host: str, queue: str, task_id: str) -> Task:
        return producing.read(self.core, host, queue, task_id)

    def read_group(
        self, host: str, queue: str, group: str, *, seen_by: str | _Any | None = ANY
    ) -> GroupView:
        return groups.read_group(self.core, host, queue, group, seen_by=seen_by)

    def group_members(self, host: str, queue: str, group: str, *, limit: int = 50) -> list[Task]:
        return groups.members(self.core, host, queue, group, limit=limit)

    def group_names(self, host: str, queue: str, *, limit: int = 100) -> list[str]:
        return groups.names(self.core, host, queue, limit=limit)

    def fetch(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        now: int | None = None,
        current: Task | None = None,
    ) -> Task:
        return producing.fetch(self.core, host, queue, task_id, now=now, current=current)

    def wait_for_change(
        self, host: str, queue: str, task_id: str, *, since: int, wait_seconds: float
    ) -> Task:
        return producing.wait_for_change(
            self.core, host, queue, task_id, since=since, wait_seconds=wait_seconds
        )

    # -- owners and operators ---------------------------------------------------------------

    def cancel(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> Task:
        return operating.cancel(self.core, host, queue, task_id, settings=settings, now=now, by=by)

    def retry(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
        item: Any = None,
    ) -> Task:
        return operating.retry(
            self.core, host, queue, task_id, settings=settings, now=now, by=by, item=item
        )

    def requeue(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> Task:
        return operating.requeue(self.core, host, queue, task_id, settings=settings, now=now, by=by)

    def hasten(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> Task:
        return operating.hasten(self.core, host, queue, task_id, settings=settings, now=now, by=by)

    def delete(
        self, host: str, queue: str, task_id: str, *, now: int | None = None, by: str | None = None
    ) -> Task:
        return operating.delete(self.core, host, queue, task_id, now=now, by=by)

    def repost(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> PostResult:
        return operating.repost(self.core, host, queue, task_id, settings=settings, now=now, by=by)

    def has_archived_item(self, host: str, queue: str, task_id: str) -> bool:
        """Whether a re-post of the task would find its item in the payload archive."""
        return self.core.archive.has_item(host, queue, task_id)

    # -- listings ---------------------------------------------------------------------------

    def list_tasks(
        self,
        host: str,
        queue: str,
        *,
        status: str | None = None,
        posted_by: str | _Any | None = ANY,
        limit: int = 50,
        offset: int = 0,
    ) -> TaskPage:
        return listing.list_tasks(
            self.core,
            host,
            queue,
            status=status,
            posted_by=posted_by,
            limit=limit,
            offset=offset,
        )

    def stats(self, host: str, queue: str, *, now: int | None = None) -> QueueStats:
        return listing.stats(self.core, host, queue, now=now)

    def find(
        self,
        host: str,
        queue: str,
        selection: Selection,
        *,
        newest_first: bool = True,
        limit: int = 50,
        offset: int = 0,
        after: OrderKey | None = None,
        until: OrderKey | None = None,
        budget: int = 2_000,
    ) -> Found:
        return selecting.find(
            self.core,
            host,
            queue,
            selection,
            newest_first=newest_first,
            limit=limit,
            offset=offset,
            after=after,
            until=until,
            budget=budget,
        )

    def state_counts(self, host: str, queue: str, *, now: int | None = None) -> StateCounts:
        return selecting.state_counts(self.core, host, queue, now=now)

    def claimable_ahead(self, host: str, queue: str, task: Task, *, now: int) -> int:
        return selecting.claimable_ahead(self.core, host, queue, task, now=now)

    def flow_state(
        self, host: str, queue: str, *, settings: QueueSettings, now: int | None = None
    ) -> FlowState:
        """The queue's flow control now: processing, the bucket's fill, processing per key."""
        with self.core.queue_dirs(host, queue) as qd:
            return gate.flow_state(qd, settings, now_ms(now), self.core.dir_counts)

    # -- workers ----------------------------------------------------------------------------

    def claim(
        self,
        host: str,
        queue: str,
        *,
        settings: QueueSettings,
        worker: str,
        lease_seconds: int | None = None,
        max_tasks: int = 1,
        now: int | None = None,
    ) -> list[Task]:
        return claiming.claim(
            self.core,
            host,
            queue,
            settings=settings,
            worker=worker,
            lease_seconds=lease_seconds,
            max_tasks=max_tasks,
            now=now,
        )

    def wait_claim(
        self,
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
        return claiming.wait_claim(
            self.core,
            host,
            queue,
            settings=settings,
            worker=worker,
            wait_seconds=wait_seconds,
            lease_seconds=lease_seconds,
            max_tasks=max_tasks,
            still_wanted=still_wanted,
        )

    def unclaim(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        worker: str,
        attempt: int,
        now: int | None = None,
    ) -> Task:
        return claiming.unclaim(
            self.core, host, queue, task_id, settings=settings, worker=worker, attempt=attempt,
            now=now,
        )  # fmt: skip

    def progress(
        self,
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
        return working.progress(
            self.core,
            host,
            queue,
            task_id,
            settings=settings,
            worker=worker,
            attempt=attempt,
            progress=progress,
            lease_seconds=lease_seconds,
            now=now,
        )

    def finish(
        self,
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
        return working.finish(
            self.core,
            host,
            queue,
            task_id,
            settings=settings,
            worker=worker,
            attempt=attempt,
            result=result,
            now=now,
        )

    def finish_many(
        self,
        host: str,
        queue: str,
        reports: list[Report],
        *,
        settings: QueueSettings,
        worker: str,
        now: int | None = None,
    ) -> list[Reported | StoreError]:
        return working.finish_many(
            self.core, host, queue, reports, settings=settings, worker=worker, now=now
        )

    def fail(
        self,
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
        return working.fail(
            self.core,
            host,
            queue,
            task_id,
            settings=settings,
            worker=worker,
            attempt=attempt,
            result=result,
            retry=retry,
            cancelled=cancelled,
            now=now,
        )

    # -- the sweep --------------------------------------------------------------------------

    def sweep_queue(
        self, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
    ) -> SweepReport:
        """The module's sweep_queue as a method, so a caller holding a TaskStore sweeps either
        kind of store the same way."""
        return sweep_queue(self, host, queue, settings, now=now_ms(now))

    def preview_sweep(
        self, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
    ) -> SweepPreview:
        """The module's preview_sweep as a method, as TaskStore asks."""
        return preview_sweep(self, host, queue, settings, now=now)


def sweep_queue(
    store: TaskStore, host: str, queue: str, settings: QueueSettings, *, now: int
) -> SweepReport:
    """Sweep one queue: queue timeout, lease timeout, retention, and (on the file store)
    repair (sweep.py); any other TaskStore sweeps by its own method."""
    if isinstance(store, QueueStore):
        return sweep.sweep_queue(store.core, host, queue, settings, now=now)
    return store.sweep_queue(host, queue, settings, now=now)


def sweep_all(
    store: QueueStore,
    settings_for: Callable[[str, str], QueueSettings | None],
    *,
    now: int | None = None,
) -> SweepReport:
    """Sweep every queue on disk that has settings; skipped if another sweep is running."""
    return sweep.sweep_all(store.core, settings_for, now=now)


def preview_sweep(
    store: QueueStore, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
) -> SweepPreview:
    """What the next sweep would do to the queue with `settings`; changes nothing."""
    return sweep_preview.preview_queue(store.core, host, queue, settings, now=now)


if TYPE_CHECKING:

    def _file_store_is_a_task_store(store: QueueStore) -> TaskStore:
        """mypy's proof that QueueStore implements every TaskStore method, as declared."""
        return store
