"""Idempotency keys: a replay archives nothing, and a key whose task never appeared is swept.

A post writes its key, then its task; a crash between the two left a key that no sweep removed
(and a post archived the item before the key was settled, so every replay left an archive folder
for an id that never existed)."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from dataclasses import replace

import pytest

from queues.store import QueueStore, StoreConfig, files, sweep_queue

from .conftest import HOST, QUEUE, SETTINGS

GRACE = 60_000  # the stale-temp age: a key this old whose task is nowhere was left by a crash


def test_a_replayed_post_with_archiving_leaves_one_archive_folder(h):
    archiving = replace(SETTINGS, archive_payloads=True)
    first = h.post({"a": 1}, settings=archiving, idempotency_key="k1")
    again = h.store.post(HOST, QUEUE, {"a": 1}, settings=archiving, posted_by="alice",
                         idempotency_key="k1")  # fmt: skip
    assert again.replayed and again.task.id == first.id
    assert h.archived_tasks() == [first.id]
    assert [e["archived"] for e in h.events(first.id)] == [["item"]]


def _post_and_die_before_the_task(config: StoreConfig, now: int) -> None:
    """A child's keyed post that dies as it opens its task's temp file (the key's temp is
    the first open, the task's the second): its key published, its task never written."""
    store, opens = QueueStore(config), 0

    def before(_call: int, kind: str) -> None:
        nonlocal opens
        opens += kind == "open"
        if opens == 2:
            os._exit(137)

    files.FAULTS.before = before
    store.post(HOST, QUEUE, {"a": 1}, settings=SETTINGS, posted_by="alice", now=now,
               idempotency_key="k1")  # fmt: skip


def _crash_between_key_and_task(h, now: int) -> str:
    """A keyed post killed after its key was published: the key file alone is left, as a
    crash there leaves it (a refused write removes its key: test_storage_faults.py). The name
    of the key file."""
    h.store.create_queue(HOST, QUEUE)
    child = mp.get_context("fork").Process(target=_post_and_die_before_the_task,
                                            args=(h.config, now))  # fmt: skip
    child.start()
    child.join(30)
    assert child.exitcode == 137
    [key] = os.listdir(h.queue_dir / "keys")
    assert [p.parent.name for p in h.queue_dir.glob("*/*.json")] == ["keys"]  # no task anywhere
    return key


NO_KEY_FILES = (
    "a key file apart from its task: the PostgreSQL store keeps the key in its task's row"
)


@pytest.mark.files_only(NO_KEY_FILES)
def test_a_key_whose_task_never_appeared_is_removed_after_the_grace_period(h):
    now = int(time.time() * 1000)  # the key's age is its file's: the sweep runs on the real clock
    key = _crash_between_key_and_task(h, now)
    report = sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=now + GRACE - 1000)
    assert os.listdir(h.queue_dir / "keys") == [key]  # its poster may be between its writes
    report = sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=now + GRACE + 5000)
    assert os.listdir(h.queue_dir / "keys") == [] and report.keys_removed == 1
    # a client retrying with the same key now makes a new task
    task = h.post({"a": 1}, idempotency_key="k1", now=now + GRACE + 6000)
    assert h.where(task.id) == ["pending"]
    assert len(os.listdir(h.queue_dir / "keys")) == 1


def test_a_key_whose_task_exists_in_any_state_is_kept(h):
    now = int(time.time() * 1000)
    pending = h.post({"p": 1}, idempotency_key="pending", now=now)
    running = h.post({"r": 1}, idempotency_key="running", now=now - 1)
    finished = h.post({"f": 1}, idempotency_key="finished", now=now - 2)
    for task in (finished, running):
        claimed = h.claim(now=now)
        assert claimed.id == task.id
    h.store.finish(HOST, QUEUE, finished.id, settings=SETTINGS, worker="box-1", attempt=1,
                   result={}, now=now)  # fmt: skip
    long = replace(SETTINGS, lease_seconds=3600, retain_seconds=3600)
    report = sweep_queue(h.store, HOST, QUEUE, long, now=now + GRACE * 10)
    assert report.keys_removed == 0 and h.keys() == 3
    assert h.where(pending.id) == ["pending"]


@pytest.mark.files_only(NO_KEY_FILES)
@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"id": "../../etc"}'])
def test_a_key_that_names_no_task_is_removed_after_the_grace_period(h, content):
    now = int(time.time() * 1000)
    h.post(now=now)  # makes the queue
    (h.queue_dir / "keys" / "0123456789abcdef0123456789abcdef.json").write_bytes(content)
    assert sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=now).keys_removed == 0
    report = sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=now + GRACE + 5000)
    assert report.keys_removed == 1 and os.listdir(h.queue_dir / "keys") == []
    assert report.errors == []
