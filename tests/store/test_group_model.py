"""Groups against a model (hypothesis): posts joining two groups, the post that closes one,
endings of every kind, retries of ended tasks, restarts and sweeps, on both stores. After every
step the store's counts agree with the model's, a group has at most one callback, and a closed
group whose tasks have all ended has exactly one after a sweep, carrying the model's outcome."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from queues.store import GroupClosed, NotFound, OnComplete, QueueSettings

from . import pg
from .conftest import HOST, QUEUE, T0, Harness

S = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600, max_attempts=0,
                  retain_seconds=10 * 86400)  # fmt: skip
GROUPS = ("ga", "gb")
CALLBACKS = "reports"


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = self.make_harness()
        self.h.store.create_queue(HOST, QUEUE)
        self.now = T0
        # group -> {"members": {id: first outcome or None}, "closed": bool}
        self.model: dict[str, dict[str, Any]] = {
            g: {"members": {}, "closed": False} for g in GROUPS
        }
        self.running: dict[str, str] = {}  # id -> its group, for the tasks not ended
        self.ended: dict[str, tuple[str, str]] = {}  # id -> (its group, how it ended last)

    def make_harness(self) -> Any:
        self.tmp = tempfile.TemporaryDirectory()
        return Harness(Path(self.tmp.name))

    def teardown(self) -> None:
        self.h.store.close()
        self.tmp.cleanup()

    def tick(self) -> int:
        self.now += 1000
        return self.now

    @rule(group=st.sampled_from(GROUPS), closing=st.booleans())
    def post(self, group: str, closing: bool) -> None:
        on_complete = (
            OnComplete(queue=CALLBACKS, item={"g": group}, settings=S) if closing else None
        )
        try:
            task = self.h.store.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="alice",
                                     now=self.tick(), group=group,
                                     on_complete=on_complete).task  # fmt: skip
        except GroupClosed:
            assert self.model[group]["closed"]
            return
        assert not self.model[group]["closed"]
        self.model[group]["members"][task.id] = None
        self.model[group]["closed"] = closing
        self.running[task.id] = group

    @rule(data=st.data(), how=st.sampled_from(["finish", "fail", "cancel"]))
    def end_one(self, data: st.DataObject, how: str) -> None:
        if not self.running:
            return
        task_id = data.draw(st.sampled_from(list(self.running)))  # post order: ids are random
        group = self.running.pop(task_id)
        now = self.tick()
        if how == "cancel":
            self.h.store.cancel(HOST, QUEUE, task_id, settings=S, now=now)
            outcome = "cancelled"
        else:
            task = self.h.store.read(HOST, QUEUE, task_id)
            assert task.status.value == "pending"
            claimed = self.h.store.claim(HOST, QUEUE, settings=S, worker="w", now=now,
                                         max_tasks=100)  # fmt: skip
            for other in claimed:  # put the others back: only this one ends now
                if other.id != task_id:
                    self.h.store.requeue(HOST, QUEUE, other.id, settings=S, now=now)
            args = {"settings": S, "worker": "w", "attempt": task.attempts + 1, "now": now}
            if how == "finish":
                self.h.store.finish(HOST, QUEUE, task_id, result={}, **args)
                outcome = "finished"
            else:
                self.h.store.fail(HOST, QUEUE, task_id, result={}, **args)
                outcome = "failed"
        self.ended[task_id] = (group, outcome)
        members = self.model[group]["members"]
        if members[task_id] is None:
            members[task_id] = outcome

    @rule(data=st.data())
    def retry_an_ended_one(self, data: st.DataObject) -> None:
        ended = [(g, t) for t, (g, last) in self.ended.items() if last in ("failed", "cancelled")]
        if not ended:
            return
        group, task_id = data.draw(st.sampled_from(ended))
        self.h.store.retry(HOST, QUEUE, task_id, settings=S, now=self.tick())
        del self.ended[task_id]
        self.running[task_id] = group  # runs again, and counts as it first ended

    @rule()
    def restart_and_sweep(self) -> None:
        self.h.reopen()
        self.h.store.sweep_queue(HOST, QUEUE, S, now=self.tick())
        for group in GROUPS:
            if self._complete(group):
                assert len(self._callbacks(group)) == 1, group

    def _complete(self, group: str) -> bool:
        model = self.model[group]
        return model["closed"] and all(o is not None for o in model["members"].values())

    def _callbacks(self, group: str) -> list[Any]:
        try:
            tasks = self.h.store.list_tasks(HOST, CALLBACKS, limit=200).tasks
        except NotFound:
            return []
        return [t for t in tasks if t.item["g"] == group]

    @invariant()
    def counts_agree_and_a_callback_is_posted_once_with_the_outcome(self) -> None:
        for group in GROUPS:
            model = self.model[group]
            callbacks = self._callbacks(group)
            assert len(callbacks) <= 1
            if not model["members"]:
                continue
            view = self.h.store.read_group(HOST, QUEUE, group)
            outcomes = [o for o in model["members"].values() if o is not None]
            assert view.counts.posted == len(model["members"])
            assert view.counts.ended == len(outcomes)
            for name, n in view.counts.outcomes().items():
                assert n == outcomes.count(name), (group, name)
            if callbacks:
                assert self._complete(group)
                outcome = callbacks[0].item["group"]
                assert outcome["counts"] == view.counts.outcomes()
                unfinished = sorted(t for t, o in model["members"].items() if o != "finished")
                assert outcome["unfinished"] == unfinished


GroupMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_group_model = GroupMachine.TestCase


class PgGroupMachine(GroupMachine):
    """The same model on the PostgreSQL store, each example in a fresh schema."""

    def make_harness(self) -> Any:
        return pg.PgHarness()

    def teardown(self) -> None:
        self.h.drop()


def test_group_model_on_postgres() -> None:
    pg.require_server()
    run_state_machine_as_test(
        PgGroupMachine, settings=settings(GroupMachine.TestCase.settings, max_examples=10)
    )
