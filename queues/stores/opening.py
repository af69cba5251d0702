"""How the Django side opens the stores: the process's router, one per configuration, over the
file store of the settings' directories and the PostgreSQL store of pg_location's database
(opened on first use, one per database and process); `of(host, queue)`, the queue's store."""

from __future__ import annotations

import threading
from functools import cache

from django.conf import settings

from queues.store import QueueStore, StoreConfig
from queues.store.interface import TaskStore
from queues.store_pg import PgStoreConfig, PostgresStore
from queues.stores.kinds import kind_of, postgres_queues
from queues.stores.pg_location import TASK_LOGS_TABLE, PgLocation, pg_location
from queues.stores.router import StoreRouter


def store_config() -> StoreConfig:
    return StoreConfig(
        items_dir=settings.TASKHOSTER_ITEMS_DIR,
        logs_dir=settings.TASKHOSTER_LOGS_DIR,
        fsync=settings.TASKHOSTER_FSYNC,
        flush=settings.TASKHOSTER_FLUSH,
        log_retain_days=settings.TASKHOSTER_LOG_RETAIN_DAYS,
        open_queues=settings.TASKHOSTER_OPEN_QUEUES,
        umask=settings.TASKHOSTER_UMASK,
    )


@cache
def _router_for(config: StoreConfig, pg: PgLocation | None) -> StoreRouter:
    return StoreRouter(
        QueueStore(config),
        kind_of=kind_of,
        open_postgres=(lambda: _postgres_store(pg)) if pg is not None else None,
        postgres_queues=postgres_queues,
    )


_postgres_stores: dict[PgLocation, PostgresStore] = {}
_postgres_lock = threading.Lock()


def _postgres_store(pg: PgLocation) -> PostgresStore:
    """One PostgreSQL store per database and process: one pool, one LISTEN connection."""
    with _postgres_lock:
        store = _postgres_stores.get(pg)
        if store is None:
            # On Django's own database the store writes its events into Task Logs' table, so
            # the console reads them with no ingestion; on another database, into its own.
            events = {"events_table": TASK_LOGS_TABLE} if pg.shares_console_db else {}
            config = PgStoreConfig(
                dsn=pg.dsn,
                schema=pg.schema,
                log_retain_days=settings.TASKHOSTER_LOG_RETAIN_DAYS,
                **events,
            )
            store = _postgres_stores[pg] = PostgresStore(config)
        return store


def close_postgres_stores() -> None:
    """Close every PostgreSQL store this process opened (their pools and LISTEN threads);
    the next call that needs one opens it again. For tests that give each test a schema."""
    with _postgres_lock:
        opened = list(_postgres_stores.values())
        _postgres_stores.clear()
    _router_for.cache_clear()
    for store in opened:
        store.close()


def router() -> StoreRouter:
    """The process's router over both stores (files and PostgreSQL), for what spans them: the
    sweep of every queue, the list of queues, the file store's directories. One per
    configuration, so the file store's claim index and watcher and the PostgreSQL store's
    connections are shared."""
    return _router_for(store_config(), pg_location())


def of(host: str, queue: str) -> TaskStore:
    """The store that holds the queue's tasks, as its `store` setting says; PostgresUnavailable
    (a StorageUnavailable) for a PostgreSQL queue on a site with no PostgreSQL database."""
    return router().of(host, queue)
