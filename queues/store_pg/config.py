"""The PostgreSQL store's settings: where its database is and which tables it writes."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_EVENTS_TABLE = "th_events"


@dataclass(frozen=True, kw_only=True)
class PgStoreConfig:
    """`dsn`: a libpq connection string or URL. `events_table`: where the event lines go, a
    table with Task Logs' TaskEvent columns; a Django deployment names `tasklogs_taskevent`
    (in the same database) so Task Logs reads them with no ingestion, plain use keeps the
    store's own `th_events`. `schema`: the PostgreSQL schema of every table (tests give each
    run its own). `log_retain_days`: how long the sweep keeps event rows and archived
    payloads, as the file store keeps its day-files. `pool_size`: connections kept open
    (a verb holds one for its transaction; more callers than this wait for one)."""

    dsn: str
    events_table: str = DEFAULT_EVENTS_TABLE
    schema: str = "public"
    log_retain_days: int = 21
    pool_size: int = 8
    # how long a waiting claim or read sleeps at most between looks at the table when no
    # notification arrives (a notification lost with a dropped connection costs this much)
    poll_seconds: float = 1.0
