"""A claim on PostgreSQL whose event row cannot be written leaves nothing stranded: the lease
and the event are one transaction (the file store's counterpart: test_storage_faults.py)."""

from __future__ import annotations

import psycopg
import pytest

from . import pg
from .conftest import HOST, QUEUE


@pytest.fixture
def ph():
    harness = pg.PgHarness()
    harness.store.create_queue(HOST, QUEUE)
    yield harness
    harness.drop()


def test_a_claim_whose_event_row_is_refused_leaves_its_task_pending(ph):
    task = ph.post()
    before = ph.on_disk(task.id)
    with ph._conn() as conn:  # a real refusal by the server, at the event row's insert
        conn.execute("ALTER TABLE th_events ADD CONSTRAINT no_claims CHECK (event <> 'claimed')")
    with pytest.raises(psycopg.errors.CheckViolation):
        ph.claim()
    assert ph.on_disk(task.id) == before  # still pending, no lease, no attempt
    with ph._conn() as conn:
        conn.execute("ALTER TABLE th_events DROP CONSTRAINT no_claims")
    claimed = ph.claim()
    assert claimed.id == task.id and claimed.attempts == 1
