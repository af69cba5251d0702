"""The console's reads use the indexes they were written for, on SQLite without statistics
(as a fresh install has) and on PostgreSQL: no query walks the events of other queues, kinds or
days."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queues.console.activity import activity
from queues.console.insight import queue_insight

from .console_events import lifecycle

pytestmark = pytest.mark.django_db
TABLE = "tasklogs_taskevent"
MIN = 60_000


def event_queries(run) -> list[str]:
    """The statements on the events that `run` makes (with the parameters in), cache empty."""
    cache.clear()
    with CaptureQueriesContext(connection) as queries:
        run()
    return [q["sql"] for q in queries if TABLE in q["sql"]]


def some_events(queue: str = "resize") -> int:
    now = time.time_ns() // 1_000_000
    for i in range(30):
        lifecycle(f"{i:016x}", now - i * 40 * MIN, ("claimed", 500), ("result", 2_500),
                  ("fetched", 3_000), queue=queue)  # fmt: skip
    return now


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's EXPLAIN QUERY PLAN")
def test_sqlite_reads_the_console_indexes_only(make_queue):
    queue = make_queue()
    now = some_events()
    statements = event_queries(lambda: queue_insight(queue, now_ms=now))
    statements += event_queries(
        lambda: activity([("task.example.com", "resize")], now_s=now // 1000)
    )
    assert len(statements) >= 10
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            plan = [row[-1] for row in cursor.fetchall()]
            # The (event, at) and (at) indexes lead through every queue's events of that kind.
            assert not any("taskevent_event_at" in step or "INDEX taskevent_at " in step
                           for step in plan), (sql, plan)  # fmt: skip
            assert not any(step.startswith("SCAN") and TABLE in step for step in plan), (sql, plan)
            for step in plan:
                if "taskevent_queue_event_t" in step:
                    assert "host=? AND queue=? AND event=?" in step, (sql, plan)


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's EXPLAIN")
def test_postgres_counts_the_dashboard_from_the_covering_index(make_queue):
    """With a realistic table (a month of events, the planner's statistics fresh), the
    dashboard's aggregates are index-only range scans of (host, queue, event, t)."""
    make_queue()
    now_s = time.time_ns() // 1_000_000_000
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {TABLE} (t, at, host, queue, task_id, event, status, attempts, worker,
                bytes_item, bytes_progress, bytes_result, bytes_error, archived, file, "offset",
                digest)
            SELECT %s - g * 13, to_timestamp(%s - g * 13), 'task.example.com',
                   'q' || (g %% 20), lpad(to_hex(g / 5), 16, '0'),
                   (ARRAY['posted','claimed','progress','result','fetched'])[g %% 5 + 1],
                   'pending', 1, '', 1, 0, 0, 0, '', 'plan.jsonl', g, g
            FROM generate_series(1, 200000) AS g
            """,
            [now_s, now_s],
        )
        cursor.execute(f"ANALYZE {TABLE}")
        statements = event_queries(
            lambda: activity([("task.example.com", f"q{i}") for i in range(20)], now_s=now_s)
        )
        assert len(statements) == 2
        for sql in statements:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "Index Only Scan using taskevent_queue_event_t" in plan, plan
            assert "Seq Scan" not in plan, plan
