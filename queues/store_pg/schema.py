"""The store's tables, made on open with CREATE ... IF NOT EXISTS.

Two processes opening the store at once would race on the catalog (IF NOT EXISTS is not
atomic against a concurrent CREATE), so the DDL runs under a transaction-scoped advisory lock.

- th_queues: the queues that exist (a post, a claim or create_queue makes one).
- th_tasks: one row per task. `record` is the task's JSON record exactly as the file store
  writes it (Task.to_record, orjson's bytes), as `json`, which keeps the text as written
  (jsonb would refuse a "\\u0000" inside an item). The other columns are copies of record
  fields that the claims, the sweep and the listings filter and order on; every write sets
  them from the same Task, so they never disagree with it.
- the events table (`th_events` by default): Task Logs' TaskEvent columns, one row per line.
- th_flow: a queue's flow control: the row limited claims lock, and the rate limit's bucket.
- th_payloads: the payload archive, one row per archived file, under the file archive's names.
- th_groups, th_group_members: groups with a callback (groups.py).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from .config import DEFAULT_EVENTS_TABLE, PgStoreConfig

# Any constant both processes agree on: the DDL's advisory lock (pg_advisory_xact_lock).
DDL_LOCK = 0x7448_5354_4F52_4531  # "tHSTORE1"

_TABLES = """
CREATE TABLE IF NOT EXISTS th_queues (
    host varchar(253) NOT NULL,
    queue varchar(64) NOT NULL,
    PRIMARY KEY (host, queue)
);
CREATE TABLE IF NOT EXISTS th_tasks (
    host varchar(253) NOT NULL,
    queue varchar(64) NOT NULL,
    id varchar(16) NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    status varchar(16) NOT NULL,
    priority integer NOT NULL,
    attempts integer NOT NULL,
    posted_at bigint NOT NULL,
    available_at bigint NOT NULL,
    window_start bigint NOT NULL,
    lease_until bigint,
    posted_by text,
    idempotency_key text,
    -- the hash of the item its keyed post carried (posting.item_hash): a replay of the key
    -- with another item is refused, whatever an operator's retry made of the item since
    key_item_hash text,
    updated_at bigint NOT NULL,
    finished_at bigint,
    fetched_at bigint,
    record json NOT NULL,
    PRIMARY KEY (host, queue, id)
);
CREATE INDEX IF NOT EXISTS th_tasks_claim
    ON th_tasks (host, queue, priority DESC, posted_at, seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS th_tasks_leases
    ON th_tasks (host, queue, lease_until) WHERE status = 'processing';
CREATE INDEX IF NOT EXISTS th_tasks_window
    ON th_tasks (host, queue, window_start) WHERE status IN ('pending', 'processing');
CREATE INDEX IF NOT EXISTS th_tasks_listing ON th_tasks (host, queue, posted_at, id);
CREATE INDEX IF NOT EXISTS th_tasks_status_listing
    ON th_tasks (host, queue, status, posted_at, id);
-- One task per (queue, producer, key) for as long as the task lives (the file store's rule:
-- the key goes when the task is cleaned). A public post's producer is NULL, one producer too.
CREATE UNIQUE INDEX IF NOT EXISTS th_tasks_idempotency
    ON th_tasks (host, queue, posted_by, idempotency_key) NULLS NOT DISTINCT
    WHERE idempotency_key IS NOT NULL;
-- A queue's flow control (queues/store_pg/limits.py): the row every limited claim locks first,
-- and the rate limit's bucket (its fill `tokens` at `at`, ms, or NULL: full, never used)
CREATE TABLE IF NOT EXISTS th_flow (
    host varchar(253) NOT NULL,
    queue varchar(64) NOT NULL,
    tokens double precision,
    at bigint,
    PRIMARY KEY (host, queue)
);
CREATE TABLE IF NOT EXISTS th_payloads (
    host varchar(253) NOT NULL,
    queue varchar(64) NOT NULL,
    task_id varchar(16) NOT NULL,
    name varchar(64) NOT NULL,
    body bytea NOT NULL,
    at bigint NOT NULL,
    PRIMARY KEY (host, queue, task_id, name)
);
CREATE INDEX IF NOT EXISTS th_payloads_at ON th_payloads (at);
-- Who waits for a task (dependencies.py): one row per (awaited task, waiting task) of a host,
-- deleted in the transaction that releases the waiting one.
CREATE TABLE IF NOT EXISTS th_dependencies (
    host varchar(253) NOT NULL,
    queue varchar(64) NOT NULL,
    id varchar(16) NOT NULL,
    waiter_queue varchar(64) NOT NULL,
    waiter_id varchar(16) NOT NULL,
    PRIMARY KEY (host, queue, id, waiter_queue, waiter_id)
);
-- Groups (groups.py): a group's counts, the onComplete of the post that closed it, and its
-- callback once posted, and its members, each with the outcome it first ended with.
CREATE TABLE IF NOT EXISTS th_groups (
    host varchar(253) NOT NULL,
    queue varchar(64) NOT NULL,
    grp varchar(64) NOT NULL,
    posted_by text,
    posted bigint NOT NULL DEFAULT 0,
    ended bigint NOT NULL DEFAULT 0,
    finished bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    cancelled bigint NOT NULL DEFAULT 0,
    gone bigint NOT NULL DEFAULT 0,
    on_complete json,
    callback_queue varchar(64),
    callback_id varchar(16),
    PRIMARY KEY (host, queue, grp)
);
CREATE TABLE IF NOT EXISTS th_group_members (
    host varchar(253) NOT NULL,
    queue varchar(64) NOT NULL,
    grp varchar(64) NOT NULL,
    id varchar(16) NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    outcome varchar(16),
    PRIMARY KEY (host, queue, grp, id)
);
CREATE INDEX IF NOT EXISTS th_group_members_order ON th_group_members (host, queue, grp, seq);
-- The events' `offset`: Task Logs' (file, offset, digest) is unique, and our rows' file is
-- 'postgres' and digest 0, so the offset alone tells them apart.
CREATE SEQUENCE IF NOT EXISTS th_event_offsets;
"""

# Task Logs' tasklogs_taskevent, column for column (tasklogs/models.py), as Django makes it.
_EVENTS = """
CREATE TABLE IF NOT EXISTS {table} (
    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    t bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    host varchar(253) NOT NULL,
    queue varchar(64) NOT NULL,
    task_id varchar(16) NOT NULL,
    event varchar(16) NOT NULL,
    status varchar(16) NOT NULL,
    attempts integer NOT NULL,
    worker varchar(255) NOT NULL,
    bytes_item bigint NOT NULL,
    bytes_progress bigint NOT NULL,
    bytes_result bigint NOT NULL,
    bytes_error bigint NOT NULL,
    archived varchar(40) NOT NULL,
    "by" varchar(150) NOT NULL DEFAULT '',
    origin varchar(16) NOT NULL DEFAULT '',
    edited boolean NOT NULL DEFAULT false,
    lapsed boolean NOT NULL DEFAULT false,
    reason varchar(160) NOT NULL DEFAULT '',
    file varchar(64) NOT NULL,
    "offset" bigint NOT NULL,
    digest bigint NOT NULL,
    CONSTRAINT {unique} UNIQUE (file, "offset", digest)
);
CREATE INDEX IF NOT EXISTS {queue_index} ON {table} (host, queue, id);
"""


_REASON = sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS reason varchar(160) NOT NULL DEFAULT ''")


def ensure(conn: psycopg.Connection[tuple[Any, ...]], config: PgStoreConfig) -> None:
    """Create what is missing; a no-op on a database that has it all."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK,))
        conn.execute(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(config.schema))
        )
        for statement in _TABLES.split(";"):
            if statement.strip():
                conn.execute(sql.SQL(statement))
        table = config.events_table
        if not _exists(conn, config.schema, table):
            events = sql.SQL(_EVENTS).format(
                table=sql.Identifier(table),
                unique=sql.Identifier(f"{table}_line"),
                queue_index=sql.Identifier(f"{table}_queue_id"),
            )
            for statement in events.as_string(conn).split(";"):
                if statement.strip():
                    conn.execute(sql.SQL(statement))
        elif table == DEFAULT_EVENTS_TABLE:
            # The store's own table, made before its lines said why an attempt failed (Task
            # Logs' table gets the column from its Django migration instead).
            conn.execute(_REASON.format(sql.Identifier(config.schema, table)))


def _exists(conn: psycopg.Connection[tuple[Any, ...]], schema: str, table: str) -> bool:
    """Whether the events table is there already. The store's own (`th_events`) is looked for
    in the store's schema only: found on the search path, a `public.th_events` of another
    store would take this store's events. Any other name is a table Django's migration made
    (Task Logs'), found on the search path as the store's statements will find it."""
    if table == DEFAULT_EVENTS_TABLE:
        name = sql.Identifier(schema, table).as_string(conn)
    else:
        name = sql.Identifier(table).as_string(conn)
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
    return bool(row and row[0])
