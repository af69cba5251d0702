"""Where a PostgreSQL queue's tasks live: which database the PostgreSQL store opens.

Django's own database when it is PostgreSQL (then the store writes its events straight into
Task Logs' table, so the console reads them with no ingestion step), else the database named by
TASKHOSTER_PG_STORE_URL (its events go to the store's own table, and `ingest_tasklogs` copies
them into Task Logs': tasklogs/store_events.py).
Neither: no queue may choose the PostgreSQL store.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import connections
from psycopg.conninfo import make_conninfo

POSTGRES_ENGINE = "django.db.backends.postgresql"
# Task Logs' table (tasklogs.models.TaskEvent): the store's events table has its columns
TASK_LOGS_TABLE = "tasklogs_taskevent"

UNAVAILABLE = (
    "The PostgreSQL store needs a PostgreSQL database: run the site on PostgreSQL "
    "(DATABASE_URL=postgres://...) or set TASKHOSTER_PG_STORE_URL to one."
)


@dataclass(frozen=True)
class PgLocation:
    dsn: str
    # True: Django's own database, so the store's events are Task Logs' rows
    shares_console_db: bool
    # the PostgreSQL schema of the store's tables (TASKHOSTER_PG_STORE_SCHEMA)
    schema: str = "public"


def pg_location() -> PgLocation | None:
    """The PostgreSQL store's database, or None when this site has none."""
    # the connection's settings, not settings.DATABASES: a test run renames the database there
    own = connections["default"].settings_dict
    schema = settings.TASKHOSTER_PG_STORE_SCHEMA
    if own["ENGINE"] == POSTGRES_ENGINE:
        return PgLocation(dsn=_dsn_of(own), shares_console_db=True, schema=schema)
    url = settings.TASKHOSTER_PG_STORE_URL
    return PgLocation(dsn=url, shares_console_db=False, schema=schema) if url else None


def _dsn_of(db: dict) -> str:
    parts = {
        "dbname": db.get("NAME"),
        "user": db.get("USER"),
        "password": db.get("PASSWORD"),
        "host": db.get("HOST"),
        "port": str(db.get("PORT") or ""),
    }
    return make_conninfo(**{key: value for key, value in parts.items() if value})
