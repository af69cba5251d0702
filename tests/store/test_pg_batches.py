"""The PostgreSQL store's batch statements: each batch travels as one JSON parameter that the
server unpacks (every character of every text column must come back as it went), and the
planner keeps statistics of a queue that grows faster than autovacuum looks, so a batch's
locks are index probes, not a scan of the queue."""

from __future__ import annotations

import pytest

from queues.store import PostEntry, Report, Reported
from queues.store_pg import writes

from . import pg
from .conftest import HOST, QUEUE, SETTINGS

ODD = "q\"u'o\\te {a,b} \u00e9\u4e2d\U0001f600 \\u0000 NULL"


@pytest.fixture
def ph():
    harness = pg.PgHarness()
    yield harness
    harness.drop()


def _post(ph, n: int) -> list[str]:
    ids = []
    for start in range(0, n, 100):
        entries = [PostEntry(item={"n": i}) for i in range(start, min(n, start + 100))]
        ids += [p.task.id for p in ph.store.post_many(HOST, QUEUE, entries, settings=SETTINGS,
                                                       posted_by="a")]  # fmt: skip
    return ids


def test_every_character_of_a_batch_comes_back_as_it_went(ph):
    entries = [PostEntry(item={"s": ODD, "i": i}) for i in range(3)]
    posted = ph.store.post_many(HOST, QUEUE, entries, settings=SETTINGS, posted_by=ODD)
    claimed = ph.store.claim(HOST, QUEUE, settings=SETTINGS, worker=ODD, max_tasks=3)
    assert sorted(t.id for t in claimed) == sorted(p.task.id for p in posted)
    reports = [
        Report(task_id=t.id, attempt=t.attempts, outcome="result", result={"r": ODD})
        for t in claimed
    ]
    answers = ph.store.finish_many(HOST, QUEUE, reports, settings=SETTINGS, worker=ODD)
    assert all(isinstance(a, Reported) for a in answers)
    for p in posted:
        task = ph.store.read(HOST, QUEUE, p.task.id)
        assert (task.item["s"], task.posted_by, task.result) == (ODD, ODD, {"r": ODD})
    workers = {line["worker"] for line in ph.events() if line["event"] != "posted"}
    assert workers == {ODD}


def test_a_growing_queue_gets_statistics_and_its_batch_locks_probe_the_index(ph):
    ids = _post(ph, 1_200)
    assert ph.store._statistics.analyzed >= 1
    with ph._conn() as conn:
        analyzed = conn.execute(
            "SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = %s"
            " AND relname = 'th_tasks'",
            (ph.config.schema,),
        ).fetchone()
        locking = _plan(conn, "EXPLAIN (ANALYZE, COSTS OFF) " + writes._LOCK_MANY,
                        (sorted(ids[:100]), HOST, QUEUE))  # fmt: skip
    assert analyzed is not None and analyzed["last_analyze"] is not None
    # each id found by its primary key, not by reading the queue's rows and dropping the rest
    assert "th_tasks_pkey" in locking and "Rows Removed by Filter" not in locking, locking


def _plan(conn, statement: str, params: tuple) -> str:
    return "\n".join(row["QUERY PLAN"] for row in conn.execute(statement, params))


def test_a_queue_that_stays_small_is_not_analyzed_by_its_posts(ph):
    _post(ph, 300)
    assert ph.store._statistics.analyzed == 0
