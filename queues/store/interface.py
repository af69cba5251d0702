"""TaskStore: what the API, the console, the sweep and Task Logs may ask of a store.

Two classes implement it: QueueStore (the file store, store.py) and PostgresStore
(queues/store_pg). Each method has QueueStore's signature and answers with the same values
(Task, PostResult, Reported, ...) and the same refusals (errors.py), so a caller never knows
which store a queue uses. What only the file store has (its directories, `queue_dirs`, and its
StoreConfig) stays out of the interface. Each store holds mypy's proof that it answers every
method as declared, next to its class: this module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .batch import OnComplete, PostEntry, Report
from .errors import StoreError
from .limits import FlowState
from .records import Task
from .results import ANY, GroupView, PostResult, QueueStats, Reported, TaskPage, _Any
from .selecting import Found, OrderKey, Selection, StateCounts
from .settings import QueueSettings
from .sweep import SweepReport
from .sweep_preview import SweepPreview


class TaskStore(Protocol):
    def close(self) -> None: ...

    def create_queue(self, host: str, queue: str) -> None: ...

    def queues(self) -> list[tuple[str, str]]: ...

    def holds_queue(self, host: str, queue: str) -> bool: ...

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
    ) -> PostResult: ...

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
    ) -> list[PostResult]: ...

    def read(self, host: str, queue: str, task_id: str) -> Task: ...

    def read_group(
        self, host: str, queue: str, group: str, *, seen_by: str | _Any | None = ANY
    ) -> GroupView:
        """A group's progress; NotFound for one never posted to (or a name that is none). With
        `seen_by` (a producer's name, or None for a caller with none), NotFound too for a
        group posted by another producer (a group of public posts, postedBy null, anyone
        reads), decided before its counts are read, at the cost of one never posted to."""
        ...

    def group_members(self, host: str, queue: str, group: str, *, limit: int = 50) -> list[Task]:
        """Up to `limit` of a group's tasks as they stand, in post order (the console's page)."""
        ...

    def group_names(self, host: str, queue: str, *, limit: int = 100) -> list[str]:
        """The first `limit` of the queue's groups, by name (the console's queue page)."""
        ...

    def fetch(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        now: int | None = None,
        current: Task | None = None,
    ) -> Task: ...

    def wait_for_change(
        self, host: str, queue: str, task_id: str, *, since: int, wait_seconds: float
    ) -> Task: ...

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
    ) -> Task: ...

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
    ) -> Task: ...

    def requeue(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> Task: ...

    def hasten(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> Task: ...

    def delete(
        self, host: str, queue: str, task_id: str, *, now: int | None = None, by: str | None = None
    ) -> Task: ...

    def repost(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> PostResult: ...

    def has_archived_item(self, host: str, queue: str, task_id: str) -> bool: ...

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
    ) -> TaskPage: ...

    def stats(self, host: str, queue: str, *, now: int | None = None) -> QueueStats: ...

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
    ) -> Found: ...

    def state_counts(self, host: str, queue: str, *, now: int | None = None) -> StateCounts: ...

    def claimable_ahead(self, host: str, queue: str, task: Task, *, now: int) -> int:
        """Claimable tasks the next claims take before this pending one (at most 1,000)."""
        ...

    def flow_state(
        self, host: str, queue: str, *, settings: QueueSettings, now: int | None = None
    ) -> FlowState: ...

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
    ) -> list[Task]: ...

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
        """claim, waiting up to `wait_seconds` for a task; `still_wanted` (the caller's
        connection is open) is asked before each look that could take one and at least every
        rules.STILL_WANTED_SECONDS while it sleeps: once false, it ends with nothing taken."""
        ...

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
        """Give back a claim whose caller left before it heard of it: pending again, its
        attempt uncounted, claimable at once (`unclaimed`; cancelled if a cancel was asked
        meanwhile). LeaseLost unless the task is still that worker's and attempt's."""
        ...

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
    ) -> Task: ...

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
    ) -> Reported: ...

    def finish_many(
        self,
        host: str,
        queue: str,
        reports: list[Report],
        *,
        settings: QueueSettings,
        worker: str,
        now: int | None = None,
    ) -> list[Reported | StoreError]: ...

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
    ) -> Reported: ...

    # -- the sweep --------------------------------------------------------------------------

    def sweep_queue(
        self, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
    ) -> SweepReport:
        """Queue timeout, lease timeout (with the attempt budget) and retention on one queue;
        safe beside another sweep of the same queue in another process."""
        ...

    def preview_sweep(
        self, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
    ) -> SweepPreview:
        """What the next sweep would do to the queue with `settings`; changes nothing."""
        ...
