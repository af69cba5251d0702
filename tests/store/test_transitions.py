"""The transition table decides: every record written and every event line is checked against it
in the one place each store writes (the file store's QueueCore, the PostgreSQL store's Writer),
and a change it does not list is refused before anything is written."""

from __future__ import annotations

import pytest

from queues.store import InvalidTransition, State, sweep_queue
from queues.store.records import TRANSITIONS

from .conftest import HOST, QUEUE, SETTINGS, T0


def _unchanged(h, task_id, before_disk, before_events):
    assert h.on_disk(task_id) == before_disk
    assert h.events() == before_events
    assert h.temp_files() == []


@pytest.mark.parametrize(
    ("target", "event"),
    [
        (State.FINISHED, "result"),  # pending straight to finished: not in the table
        (State.PROCESSING, "progress"),  # a claim's states with another event
        (State.PENDING, "retried"),  # pending to pending is only the sweep's requeue
        (State.CANCELLED, None),  # a change that must be logged, unlogged
    ],
)
def test_apply_refuses_a_triple_not_in_the_table_and_writes_nothing(h, target, event):
    task = h.post()
    disk, events = h.on_disk(task.id), h.events()
    new = task.replace(status=target, updated_at=T0 + 1)
    with pytest.raises(InvalidTransition) as refused:
        h.write_change(task, new, event, now=T0 + 1)
    assert refused.value.code == "internal"
    assert (refused.value.task_id, refused.value.source, refused.value.target) == (
        task.id,
        "pending",
        target.value,
    )
    _unchanged(h, task.id, disk, events)


def test_remove_refuses_a_task_that_is_not_terminal(h):
    task = h.post()
    disk, events = h.on_disk(task.id), h.events()
    with pytest.raises(InvalidTransition):
        h.write_removal(task, now=T0 + 1)
    _unchanged(h, task.id, disk, events)


def test_admit_refuses_a_new_task_that_is_not_pending(h):
    task = h.post()
    other = task.replace(id="0" * 16, status=State.FINISHED)
    events = h.events()
    with pytest.raises(InvalidTransition):
        h.write_new(other, now=T0)
    assert h.on_disk(other.id) == {} and h.events() == events


@pytest.mark.files_only("a claim interrupted between its rename and its rewrite: no rename here")
def test_the_sweeps_requeue_and_clean_are_in_the_table_and_go_through_it(h):
    """The interrupted claim's requeue (a pending record in processing/) and retention's clean
    used to write and log beside the table; now they are its triples."""
    assert (State.PENDING, State.PENDING, "requeue") in TRANSITIONS
    assert all((s, None, "cleaned") in TRANSITIONS for s in State if s.terminal)
    assert not any(t is None and s is not None and not s.terminal for s, t, _ in TRANSITIONS)
    task = h.post()
    # a claim that crashed between its rename and its rewrite
    (h.queue_dir / "pending" / f"{task.id}.json").rename(
        h.queue_dir / "processing" / f"{task.id}.json"
    )
    report = sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 10)
    assert report.requeue == 1 and h.where(task.id) == ["pending"]
    assert h.event_names(task.id) == ["posted", "requeue"]
