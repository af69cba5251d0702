"""Tasks posted in one millisecond come out in the order they were posted: claims (within a
priority) and listings follow the queue's post sequence, on both stores, across processes and
restarts; records from before the sequence was kept still sort, by postedAt then id."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from queues.store import PostEntry, Selection, State
from queues.store.sequence import SEQ_FILE

from . import procs
from .conftest import HOST, QUEUE, SETTINGS, T0

N = 10


def claim_all(h, n: int = N) -> list[int]:
    tasks = h.store.claim(HOST, QUEUE, settings=SETTINGS, worker="w", max_tasks=n, now=T0 + 1)
    return [t.item["n"] for t in tasks]


def claim_one_by_one(h, n: int = N) -> list[int]:
    return [h.claim(now=T0 + 1).item["n"] for _ in range(n)]


def test_a_batch_posted_in_one_millisecond_is_claimed_in_post_order(h):
    h.store.post_many(HOST, QUEUE, [PostEntry(item={"n": i}) for i in range(N)],
                      settings=SETTINGS, posted_by="alice", now=T0)  # fmt: skip
    assert claim_one_by_one(h) == list(range(N))


def test_single_posts_in_one_millisecond_are_claimed_in_post_order(h):
    for i in range(N):
        h.post({"n": i}, now=T0)
    assert claim_all(h) == list(range(N))


def test_priority_still_comes_before_post_order(h):
    for i in range(4):
        h.post({"n": i}, now=T0, priority=5 if i in (1, 3) else 0)
    assert claim_one_by_one(h, 4) == [1, 3, 0, 2]


def test_listings_give_post_order_within_a_millisecond(h):
    for i in range(N):
        h.post({"n": i}, now=T0)
    page = h.store.list_tasks(HOST, QUEUE, limit=N)
    assert [t.item["n"] for t in page.tasks] == list(reversed(range(N)))
    oldest = h.store.find(HOST, QUEUE, Selection(status=State.PENDING), newest_first=False,
                          limit=N)  # fmt: skip
    assert [t.item["n"] for t in oldest.tasks] == list(range(N))


def test_a_cursor_walk_within_one_millisecond_misses_and_repeats_nothing(h):
    for i in range(N):
        h.post({"n": i}, now=T0)
    seen, after = [], None
    while True:
        found = h.store.find(HOST, QUEUE, Selection(), newest_first=False, limit=3, after=after)
        seen += [t.item["n"] for t in found.tasks]
        if found.next_after is None:
            break
        after = found.next_after
    assert seen == list(range(N))


@pytest.mark.files_only("the restart of a file store: its sequence is on disk")
def test_post_order_survives_a_restart(h):
    for i in range(5):
        h.post({"n": i}, now=T0)
    h.reopen()
    for i in range(5, N):
        h.post({"n": i}, now=T0)
    assert claim_one_by_one(h) == list(range(N))


@pytest.mark.files_only("a file store's processes share the sequence through its file")
def test_posts_of_another_process_in_the_same_millisecond_keep_post_order(h):
    for i in range(3):
        h.post({"n": i}, now=T0)
    out = mp.get_context("spawn").Queue()
    child = mp.get_context("spawn").Process(
        target=procs.poster, args=(h.opener(), [{"n": 3}, {"n": 4}], T0, out)
    )
    child.start()
    out.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    h.post({"n": 5}, now=T0)
    assert claim_one_by_one(h, 6) == list(range(6))


@pytest.mark.files_only("records written before the post sequence was kept")
def test_records_without_a_sequence_sort_by_posted_at_then_id(h):
    ids = sorted(f"{n:016x}" for n in (7, 3, 11))
    for n, task_id in enumerate(reversed(ids)):  # planted in the reverse of id order
        h.plant("pending", {
            "id": task_id, "host": HOST, "queue": QUEUE, "status": "pending", "item": {"n": n},
            "postedBy": "alice", "postedAt": T0, "updatedAt": T0, "attempts": 0, "lease": None,
            "progress": None, "result": None, "error": None, "finishedAt": None,
            "fetchedAt": None,
        })  # fmt: skip
    h.post({"n": 9}, now=T0)  # with a sequence: after the older records of its millisecond
    claimed = [h.claim(now=T0 + 1) for _ in range(4)]
    assert [t.id for t in claimed[:3]] == ids
    assert claimed[3].item == {"n": 9}
    listed = h.store.list_tasks(HOST, QUEUE, limit=10).tasks
    assert [t.id for t in listed][1:] == list(reversed(ids))


@pytest.mark.files_only("a torn sequence file, as a power cut may leave it")
def test_a_torn_sequence_file_still_numbers_above_the_earlier_posts(h):
    for i in range(3):
        h.post({"n": i}, now=T0)
    (h.queue_dir / SEQ_FILE).write_bytes(b"12")  # a partial write of the number
    for i in range(3, 6):
        h.post({"n": i}, now=T0 + 1)
    assert claim_one_by_one(h, 6) == list(range(6))


@pytest.mark.files_only("something planted in the place of the sequence file")
@pytest.mark.parametrize("planted", ["symlink", "fifo", "directory"])
def test_a_sequence_file_that_is_not_a_file_is_moved_aside_and_the_post_goes_on(h, planted):
    h.post({"n": 0}, now=T0)
    path = h.queue_dir / SEQ_FILE
    path.unlink()
    if planted == "symlink":
        path.symlink_to(h.queue_dir / "elsewhere")
    elif planted == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    h.post({"n": 1}, now=T0 + 1)  # a new file: its floor, postedAt's, above the old numbers
    h.post({"n": 2}, now=T0 + 1)
    assert claim_one_by_one(h, 3) == [0, 1, 2]
    assert not (h.queue_dir / "elsewhere").exists()  # nothing written through the symlink
    assert path.is_file() and not path.is_symlink()
    [aside] = (h.queue_dir / "quarantine").iterdir()
    assert aside.name.startswith(f"{SEQ_FILE}.")


def test_the_sequence_is_not_in_the_answers_a_client_reads(h):
    task = h.post({"n": 0}, now=T0)
    assert "seq" not in task.status_view()
    assert "seq" not in h.claim(now=T0 + 1).full_view()
