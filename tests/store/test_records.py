"""The record's own checks, value by value: Task.from_record, to_record and replace build a
Task from its fields directly (not through the frozen __init__), so these pin what they must
still refuse and what they must keep."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from queues.store import copies
from queues.store.errors import CorruptRecord
from queues.store.records import Lease, State, Task

BASE: dict[str, Any] = {
    "id": "9f2c1a0b7d4e6f83",
    "host": "task.example.com",
    "queue": "resize",
    "status": "processing",
    "item": {"n": 1},
    "postedBy": "alice",
    "postedAt": 1,
    "updatedAt": 2,
    "attempts": 1,
    "lease": {"worker": "box-1", "until": 9},
    "progress": None,
    "result": None,
    "error": None,
    "finishedAt": None,
    "fetchedAt": None,
}


def _without(name: str) -> dict[str, Any]:
    return {k: v for k, v in BASE.items() if k != name}


@pytest.mark.parametrize(
    "record",
    [
        _without("postedBy"),  # a field of the specification is missing
        _without("lease"),
        {**BASE, "colour": "red"},  # a field nobody defines
        {**BASE, "attempts": True},  # a bool is not an integer
        {**BASE, "attempts": 1.0},
        {**BASE, "rev": "3"},
        {**BASE, "cancelRequested": 1},
        {**BASE, "item": [1]},
        {**BASE, "status": "running"},
        {**BASE, "status": ["pending"]},
        {**BASE, "lease": {"worker": "box-1"}},
        {**BASE, "lease": {"worker": 5, "until": 9}},
        {**BASE, "lease": {"worker": "box-1", "until": False}},
        [BASE],
    ],
)
def test_a_record_that_is_not_one_is_refused(record: Any) -> None:
    with pytest.raises(CorruptRecord):
        copies.parse(orjson.dumps(record))


def test_a_record_round_trips_with_every_field_set() -> None:
    task = Task(
        id="9f2c1a0b7d4e6f83", host="task.example.com", queue="resize", status=State.FAILED,
        item={"n": 1}, posted_by=None, posted_at=1, updated_at=2, attempts=3,
        lease=Lease(worker="box-1", until=9), progress={"p": 1}, result={"r": 1}, error="timeout",
        finished_at=4, fetched_at=5, rev=6, priority=-7, available_at=8, max_attempts=3,
        idempotency_key="k", cancel_requested=True, last_error={"e": 1}, lease_seconds=60,
        requeued_at=3, ended_by="box-1", reposted_from="0123456789abcdef",
        cancel_requested_by="op",
    )  # fmt: skip
    again = copies.parse(orjson.dumps(task.to_record()))
    assert again == task
    assert again.lease == Lease(worker="box-1", until=9)


def test_a_record_without_its_ext_fields_takes_their_defaults() -> None:
    task = copies.parse(orjson.dumps(BASE))
    assert (task.rev, task.priority, task.available_at, task.cancel_requested) == (0, 0, 0, False)
    assert task.idempotency_key is None and task.last_error is None
    assert task.status is State.PROCESSING
    assert task.to_record() == BASE  # ext fields at their defaults are not written


def test_replace_raises_rev_and_leaves_the_original_alone() -> None:
    task = copies.parse(orjson.dumps({**BASE, "rev": 4}))
    new = task.replace(status=State.FINISHED, result={"ok": 1}, lease=None)
    assert (new.rev, new.status, new.result, new.lease) == (5, State.FINISHED, {"ok": 1}, None)
    assert (task.rev, task.status, task.result) == (4, State.PROCESSING, None)
    assert task.lease == Lease(worker="box-1", until=9)


def test_replace_refuses_a_field_a_task_does_not_have() -> None:
    task = copies.parse(orjson.dumps(BASE))
    with pytest.raises(TypeError, match="colour"):
        task.replace(colour="red")


def test_a_task_stays_frozen() -> None:
    task = copies.parse(orjson.dumps(BASE))
    with pytest.raises(AttributeError):
        task.rev = 9  # type: ignore[misc]


def test_a_task_made_without_its_init_is_the_task_its_init_makes():
    values = dict(id="a" * 16, host="h.example", queue="q", status=State.PENDING, item={"n": 1},
                  posted_by=None, posted_at=5, updated_at=5, rev=1, priority=2)  # fmt: skip
    made = Task.of(**values)
    assert made == Task(**values) and made.__dict__ == Task(**values).__dict__
    assert made.numbered(7) == dataclasses.replace(made, seq=7)  # the same revision
    with pytest.raises(TypeError):
        Task.of(**{**values, "colour": "red"})
    with pytest.raises(TypeError):
        Task.of(**{k: v for k, v in values.items() if k != "host"})
