"""Model-based test: random operations, clock jumps, sweeps and restarts against a simple model."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from queues.store import (
    LeaseLost,
    NotCancellable,
    NotFound,
    NotRetryable,
    QueueSettings,
    sweep_queue,
)

from . import pg
from .conftest import HOST, QUEUE, T0, Harness

S = QueueSettings(
    queue_seconds=900,
    lease_seconds=60,
    retain_seconds=120,
    max_attempts=3,
    backoff_seconds=5,
    backoff_factor=2,
    backoff_cap_seconds=20,
)
# the events that may follow each status in a task's log
NEXT = {
    None: {"posted"},
    "pending": {"claimed", "cancelled", "timeout"},
    "processing": {"progress", "result", "failed", "requeue", "cancelled", "timeout", "unclaimed"},
    "finished": {"fetched", "cleaned"},
    "failed": {"fetched", "cleaned", "retried"},
    "cancelled": {"fetched", "cleaned", "retried"},
}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = self.make_harness()
        self.h.store.create_queue(HOST, QUEUE)
        self.now = T0
        self.model: dict[
            str, dict
        ] = {}  # id -> {"status", "attempts", "until", "window", "avail", "end", "budget"}

    def make_harness(self) -> Any:
        self.tmp = tempfile.TemporaryDirectory()
        return Harness(Path(self.tmp.name))

    def teardown(self) -> None:
        self.h.store.close()
        self.tmp.cleanup()

    def live(self, *statuses: str) -> list[str]:
        # Posting order, not sorted ids: ids are random, so a replay of the same steps must
        # pick the same task by position (Hypothesis calls a test flaky otherwise).
        return [i for i, m in self.model.items() if m["status"] in statuses]

    @rule(delay=st.sampled_from([0, 0, 30]))
    def post(self, delay):
        # Every post a millisecond apart: the claim breaks a postedAt tie by the random id, and
        # Hypothesis calls a test flaky when a replay of the same steps claims another task.
        self.now += 1
        task = self.h.post(settings=S, now=self.now, delay_seconds=delay)
        self.model[task.id] = {
            "status": "pending",
            "attempts": 0,
            "until": None,
            "window": self.now,  # the queue timeout counts from the post, or the last retry
            "avail": self.now + delay * 1000,
            "end": None,
            "budget": 3,
        }

    @rule()
    def claim(self):
        got = self.h.claim(settings=S, now=self.now)
        ready = [i for i in self.live("pending") if self.model[i]["avail"] <= self.now]
        if got is None:
            assert ready == []
            return
        assert got.id in ready
        m = self.model[got.id]
        m.update(status="processing", attempts=m["attempts"] + 1, until=self.now + 60_000)
        assert got.attempts == m["attempts"]

    @rule(
        data=st.data(),
        how=st.sampled_from(["finish", "fail", "retry", "progress"]),
        stale=st.booleans(),
    )
    def report(self, data, how, stale):
        running = self.live("processing")
        if not running:
            return
        task_id = data.draw(st.sampled_from(running))
        m = self.model[task_id]
        attempt = m["attempts"] - 1 if stale else m["attempts"]
        kw = {"settings": S, "worker": "box-1", "attempt": attempt, "now": self.now}
        try:
            if how == "finish":
                self.h.store.finish(HOST, QUEUE, task_id, result={"ok": 1}, **kw)
            elif how == "progress":
                self.h.store.progress(HOST, QUEUE, task_id, progress={"p": 1}, **kw)
            else:
                self.h.store.fail(HOST, QUEUE, task_id, result={"e": 1}, retry=how == "retry", **kw)
        except LeaseLost:
            assert stale
            return
        assert not stale
        if how == "finish":
            m.update(status="finished", until=None, end=self.now)
        elif how == "progress":
            m["until"] = self.now + 60_000
        elif how == "retry" and m["attempts"] < m["budget"] and not m.get("cancel"):
            # a task whose cancel was requested never goes back to pending
            backoff = min(5 * 2 ** (m["attempts"] - 1), 20) * 1000
            m.update(status="pending", until=None, avail=self.now + backoff, window=self.now)
        else:
            m.update(status="failed", until=None, end=self.now)

    @rule(data=st.data(), stale=st.booleans())
    def unclaim(self, data, stale):
        """The server gives back a claim whose client left: the attempt is not counted."""
        running = self.live("processing")
        if not running:
            return
        task_id = data.draw(st.sampled_from(running))
        m = self.model[task_id]
        attempt = m["attempts"] - 1 if stale else m["attempts"]
        try:
            self.h.store.unclaim(HOST, QUEUE, task_id, settings=S, worker="box-1",
                                 attempt=attempt, now=self.now)  # fmt: skip
        except LeaseLost:
            assert stale
            return
        assert not stale
        m.update(attempts=m["attempts"] - 1, until=None)
        if m.get("cancel"):  # a pending task whose cancel is asked is cancelled
            m.update(status="cancelled", end=self.now)
        else:
            m["status"] = "pending"

    @rule(data=st.data())
    def cancel(self, data):
        if not self.model:
            return
        task_id = data.draw(st.sampled_from(list(self.model)))
        m = self.model[task_id]
        try:
            self.h.store.cancel(HOST, QUEUE, task_id, settings=S, now=self.now)
        except (NotCancellable, NotFound):
            assert m["status"] in ("finished", "failed", "cancelled", "gone")
            return
        if m["status"] == "pending":
            m.update(status="cancelled", end=self.now)
        else:
            assert m["status"] == "processing"
            m["cancel"] = True

    @rule(data=st.data())
    def retry(self, data):
        if not self.model:
            return
        task_id = data.draw(st.sampled_from(list(self.model)))
        m = self.model[task_id]
        try:
            self.h.store.retry(HOST, QUEUE, task_id, settings=S, now=self.now)
        except (NotRetryable, NotFound):
            assert m["status"] not in ("failed", "cancelled")
            return
        m.update(
            status="pending",
            avail=0,
            end=None,
            budget=m["attempts"] + 3,
            cancel=False,
            window=self.now,
        )

    @rule(ms=st.sampled_from([1_000, 30_000, 61_000, 200_000]))
    def advance_clock(self, ms):
        self.now += ms

    @rule()
    def sweep(self):
        sweep_queue(self.h.store, HOST, QUEUE, S, now=self.now)
        for m in self.model.values():
            if m["status"] in ("pending", "processing") and self.now - m["window"] > 900_000:
                m.update(status="failed", end=self.now, until=None)
            elif m["status"] == "processing" and m["until"] <= self.now:
                if m.get("cancel"):  # its worker died: what its owner stopped never runs again
                    m.update(status="cancelled", end=self.now, until=None)
                elif m["attempts"] >= m["budget"]:
                    m.update(status="failed", end=self.now, until=None)
                else:
                    m.update(status="pending", until=None, avail=0)
            elif (
                m["status"] in ("finished", "failed", "cancelled")
                and self.now >= m["end"] + 120_000
            ):
                m["status"] = "gone"

    @precondition(lambda self: self.model)
    @rule()
    def crash_restart(self):
        self.h.reopen()

    @invariant()
    def disk_matches_model(self):
        for task_id, m in self.model.items():
            where = self.h.where(task_id)
            if m["status"] == "gone":
                assert where == []
                continue
            assert len(where) == 1, where
            assert self.h.store.read(HOST, QUEUE, task_id).status.value == m["status"]
        assert self.h.temp_files() == []

    @invariant()
    def each_log_is_a_path_of_the_table(self):
        last: dict[str, str | None] = {}
        for line in self.h.events():
            before = last.get(line["id"])
            assert line["event"] in NEXT[before], (before, line["event"])
            last[line["id"]] = line["status"] if line["event"] != "cleaned" else "gone"
        for task_id, m in self.model.items():
            assert last.get(task_id) == m["status"]


NEXT["gone"] = set()
StoreMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_store_model = StoreMachine.TestCase


class PgStoreMachine(StoreMachine):
    """The same model on the PostgreSQL store, each example in a fresh schema; its restart
    is a new store (connections, listener) on the same tables."""

    def make_harness(self) -> Any:
        return pg.PgHarness()

    def teardown(self) -> None:
        self.h.drop()


def test_store_model_on_postgres() -> None:
    pg.require_server()
    # half the file store's examples: each one makes and drops a schema, and the invariants
    # read every task's row after each step
    examples = settings(StoreMachine.TestCase.settings, max_examples=50)
    run_state_machine_as_test(PgStoreMachine, settings=examples)
