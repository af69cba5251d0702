"""StoreRouter: the one store the API, the console, the sweep and Task Logs talk to. Each call
goes to the store that holds its queue, the file store or the PostgreSQL store, as the queue's
`store` setting says (`kind_of`, which the Django side looks up from the Queue model).

Plain Python like the stores: no Django import, so mypy checks it with them. The PostgreSQL
store is opened on first use, so a site whose queues are all file queues never connects to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from queues.store import (
    ANY,
    Found,
    OrderKey,
    PostEntry,
    PostResult,
    QueueSettings,
    QueueStats,
    QueueStore,
    Report,
    Reported,
    Selection,
    StateCounts,
    StorageUnavailable,
    StoreConfig,
    StoreError,
    SweepPreview,
    SweepReport,
    Task,
    TaskPage,
    preview_sweep,
    sweep_all,
)
from queues.store.interface import TaskStore
from queues.store.results import _Any
from queues.store.sweep import unexpected
from queues.store_pg import PostgresStore
from queues.store_pg.following import EventFollower

FILES = "files"
POSTGRES = "postgres"


class PostgresUnavailable(StorageUnavailable):
    """A queue's store is PostgreSQL and this site has no PostgreSQL database for it."""


class StoreRouter:
    def __init__(
        self,
        files: QueueStore,
        *,
        kind_of: Callable[[str, str], str],
        open_postgres: Callable[[], PostgresStore] | None,
        postgres_queues: Callable[[], list[tuple[str, str]]],
    ) -> None:
        self.files = files
        self._kind_of = kind_of
        self._open_postgres = open_postgres
        self._postgres_queues = postgres_queues
        self._postgres: PostgresStore | None = None
        self._lock = threading.Lock()

    @property
    def config(self) -> StoreConfig:
        """The file store's configuration (its directories: the event log lives there)."""
        return self.files.config

    def backend(self, kind: str) -> TaskStore:
        """The store of one kind: FILES or POSTGRES."""
        return self.postgres if kind == POSTGRES else self.files

    @property
    def postgres(self) -> PostgresStore:
        with self._lock:
            if self._postgres is None:
                if self._open_postgres is None:
                    raise PostgresUnavailable(
                        "this queue's store is PostgreSQL and the site has no PostgreSQL "
                        "database for it (DATABASE_URL or TASKHOSTER_PG_STORE_URL)"
                    )
                self._postgres = self._open_postgres()
            return self._postgres

    def _store(self, host: str, queue: str) -> TaskStore:
        return self.backend(self._kind_of(host, queue))

    def kind_of(self, host: str, queue: str) -> str:
        return self._kind_of(host, queue)

    def is_postgres(self, host: str, queue: str) -> bool:
        return self._kind_of(host, queue) == POSTGRES

    # -- what only the PostgreSQL store has -------------------------------------------------

    def archived_payload(self, host: str, queue: str, task_id: str, name: str) -> bytes | None:
        """One archived payload of a PostgreSQL queue (its archive is in the database); None
        for a file queue, whose archive Task Logs opens on disk."""
        if not self.is_postgres(host, queue):
            return None
        return self.postgres.archived_payload(host, queue, task_id, name)

    def events_since(
        self, host: str, queue: str, after_id: int, limit: int = 100
    ) -> list[tuple[int, dict[str, Any]]]:
        """A PostgreSQL queue's event rows past `after_id` visible now, oldest first (to
        follow them, follow_events: a lower id may still commit after these)."""
        return self.postgres.events_since(host, queue, after_id, limit)

    def follow_events(self, host: str, queue: str, *, after_id: int | None) -> EventFollower:
        """A follower of a PostgreSQL queue's event rows (the live event stream's feed, woken
        by NOTIFY; a file queue's stream tails the day-files instead)."""
        return self.postgres.follow_events(host, queue, after_id=after_id)

    def close(self) -> None:
        """Close the file store; the PostgreSQL store is the opener's (it may be shared by
        several routers of one process, each over other directories, as in the tests)."""
        self.files.close()

    def create_queue(self, host: str, queue: str) -> None:
        self._store(host, queue).create_queue(host, queue)

    def holds_queue(self, host: str, queue: str) -> bool:
        return self._store(host, queue).holds_queue(host, queue)

    def queues(self) -> list[tuple[str, str]]:
        """Every queue either store holds tasks of (a queue that changed store may be in both)."""
        both = set(self.files.queues())
        if self._postgres_queues() or self._postgres is not None:
            both.update(self.postgres.queues())
        return sorted(both)

    # -- the sweep --------------------------------------------------------------------------

    def sweep_queue(
        self, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
    ) -> SweepReport:
        """Sweep one queue in its current store."""
        return self._store(host, queue).sweep_queue(host, queue, settings, now=now)

    def sweep_all(
        self,
        settings_for: Callable[[str, str], QueueSettings | None],
        *,
        now: int | None = None,
    ) -> SweepReport:
        """Sweep every queue of both stores: the file store's queues on disk (a queue that
        moved to PostgreSQL keeps its ended tasks there until retention removes them), and
        the PostgreSQL store's."""
        report = sweep_all(self.files, settings_for, now=now)
        if not self._postgres_queues() and self._postgres is None:
            return report
        for host, queue in self.postgres.queues():
            settings = settings_for(host, queue)  # a database gone ends the pass: the loop says so
            if settings is None:
                continue  # not a configured queue: leave its tasks alone, as the file sweep
            try:
                report.add(self.postgres.sweep_queue(host, queue, settings, now=now))
            except StoreError as exc:
                report.errors.append(f"{host}/{queue}: {exc.detail}")
            except Exception as exc:
                report.errors.append(unexpected(host, queue, exc))
        return report

    def preview_sweep(
        self, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
    ) -> SweepPreview:
        """What the next sweep would do to the queue, in its current store, with `settings`."""
        if self._kind_of(host, queue) == POSTGRES:
            return self.postgres.preview_sweep(host, queue, settings, now=now)
        return preview_sweep(self.files, host, queue, settings, now=now)

    # -- every verb on one queue: to the queue's store --------------------------------------

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
    ) -> PostResult:
        return self._store(host, queue).post(
            host,
            queue,
            item,
            settings=settings,
            posted_by=posted_by,
            priority=priority,
            delay_seconds=delay_seconds,
            idempotency_key=idempotency_key,
            now=now,
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
    ) -> list[PostResult]:
        return self._store(host, queue).post_many(
            host, queue, entries, settings=settings, posted_by=posted_by, now=now
        )

    def read(self, host: str, queue: str, task_id: str) -> Task:
        return self._store(host, queue).read(host, queue, task_id)

    def fetch(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        now: int | None = None,
        current: Task | None = None,
    ) -> Task:
        return self._store(host, queue).fetch(host, queue, task_id, now=now, current=current)

    def wait_for_change(
        self, host: str, queue: str, task_id: str, *, since: int, wait_seconds: float
    ) -> Task:
        return self._store(host, queue).wait_for_change(
            host, queue, task_id, since=since, wait_seconds=wait_seconds
        )

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
        return self._store(host, queue).cancel(
            host, queue, task_id, settings=settings, now=now, by=by
        )

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
        return self._store(host, queue).retry(
            host, queue, task_id, settings=settings, now=now, by=by, item=item
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
        return self._store(host, queue).requeue(
            host, queue, task_id, settings=settings, now=now, by=by
        )

    def delete(
        self, host: str, queue: str, task_id: str, *, now: int | None = None, by: str | None = None
    ) -> Task:
        return self._store(host, queue).delete(host, queue, task_id, now=now, by=by)

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
        return self._store(host, queue).repost(
            host, queue, task_id, settings=settings, now=now, by=by
        )

    def has_archived_item(self, host: str, queue: str, task_id: str) -> bool:
        return self._store(host, queue).has_archived_item(host, queue, task_id)

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
        return self._store(host, queue).list_tasks(
            host, queue, status=status, posted_by=posted_by, limit=limit, offset=offset
        )

    def stats(self, host: str, queue: str, *, now: int | None = None) -> QueueStats:
        return self._store(host, queue).stats(host, queue, now=now)

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
        return self._store(host, queue).find(
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
        return self._store(host, queue).state_counts(host, queue, now=now)

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
        return self._store(host, queue).claim(
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
    ) -> list[Task]:
        return self._store(host, queue).wait_claim(
            host,
            queue,
            settings=settings,
            worker=worker,
            wait_seconds=wait_seconds,
            lease_seconds=lease_seconds,
            max_tasks=max_tasks,
        )

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
        return self._store(host, queue).progress(
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
        return self._store(host, queue).finish(
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
        return self._store(host, queue).finish_many(
            host, queue, reports, settings=settings, worker=worker, now=now
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
        return self._store(host, queue).fail(
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


if TYPE_CHECKING:

    def _router_is_a_task_store(router: StoreRouter) -> TaskStore:
        """mypy's proof that the router answers every TaskStore call, as declared."""
        return router
