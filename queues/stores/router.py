"""StoreRouter: which store holds each queue, and what spans both stores. `of(host, queue)` is
the store of the queue's `store` setting (`kind_of`, which the Django side looks up from the
Queue model), the file store or the PostgreSQL store, and a caller asks that store directly;
the router itself answers only for every queue at once: the list of queues, the sweep of all.

Plain Python like the stores: no Django import, so mypy checks it with them. The PostgreSQL
store is opened on first use, so a site whose queues are all file queues never connects to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from queues.store import (
    QueueSettings,
    QueueStore,
    StorageUnavailable,
    StoreConfig,
    StoreError,
    SweepReport,
    sweep_all,
)
from queues.store.interface import TaskStore
from queues.store.sweep import unexpected
from queues.store_pg import PostgresStore

FILES = "files"
POSTGRES = "postgres"

# Which store holds a queue, by host and queue: StoreRouter.of, and stores.of on the Django side.
StoreOf = Callable[[str, str], TaskStore]


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

    def of(self, host: str, queue: str) -> TaskStore:
        """The store that holds the queue's tasks; PostgresUnavailable for a PostgreSQL queue
        on a site with no PostgreSQL database."""
        return self.backend(self._kind_of(host, queue))

    def kind_of(self, host: str, queue: str) -> str:
        return self._kind_of(host, queue)

    def is_postgres(self, host: str, queue: str) -> bool:
        return self._kind_of(host, queue) == POSTGRES

    def close(self) -> None:
        """Close the file store; the PostgreSQL store is the opener's (it may be shared by
        several routers of one process, each over other directories, as in the tests)."""
        self.files.close()

    def queues(self) -> list[tuple[str, str]]:
        """Every queue either store holds tasks of (a queue that changed store may be in both)."""
        both = set(self.files.queues())
        if self._postgres_queues() or self._postgres is not None:
            both.update(self.postgres.queues())
        return sorted(both)

    # -- the sweep --------------------------------------------------------------------------

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
