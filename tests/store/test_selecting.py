"""The console's selections: status, id prefix and a test on the record, both orders, offsets and
cursors, against the straightforward answer (every record read, filtered, sorted); and the
counts per status."""

from __future__ import annotations

import pytest

from queues.store import NotFound, QueueSettings, Selection, State, Task
from queues.store.selecting import key_of

from .conftest import HOST, QUEUE, T0

S = QueueSettings(backoff_seconds=5, backoff_factor=1, max_attempts=3)


def a_mixed_queue(h) -> list[Task]:
    """30 tasks posted a second apart (some with equal postedAt: the id breaks the tie), then
    moved into every status."""
    posted = [h.post({"n": i, "url": f"https://x/{i % 4}"}, now=T0 + (i // 2) * 1000)
              for i in range(30)]  # fmt: skip
    for task in posted[:12]:  # claim the 12 oldest...
        assert h.claim(now=T0 + 60_000) is not None
    by_id = {t.id: t for t in posted}
    claimed = sorted(posted[:12], key=key_of)
    for i, task in enumerate(claimed):
        if i % 4 == 0:
            h.store.finish(HOST, QUEUE, task.id, settings=S, worker="box-1", attempt=1,
                           result={"ok": i}, now=T0 + 61_000)  # fmt: skip
        elif i % 4 == 1:
            h.store.fail(HOST, QUEUE, task.id, settings=S, worker="box-1", attempt=1,
                         result={"e": i}, now=T0 + 61_000)  # fmt: skip
    for task in posted[20:23]:
        h.store.cancel(HOST, QUEUE, task.id, settings=S, now=T0 + 62_000)
    return [h.store.read(HOST, QUEUE, i) for i in by_id]


def expected(tasks: list[Task], status: State | None = None, prefix: str = "",
             newest_first: bool = True) -> list[str]:  # fmt: skip
    posted = {t.id: n for n, t in enumerate(tasks)}  # tasks come in post order
    chosen = [t for t in tasks if status in (None, t.status) and t.id.startswith(prefix)]
    chosen.sort(key=lambda t: (t.posted_at, posted[t.id]), reverse=newest_first)
    return [t.id for t in chosen]


def ids(found) -> list[str]:
    return [t.id for t in found.tasks]


@pytest.mark.parametrize("status", [None, *State])
@pytest.mark.parametrize("newest_first", [True, False])
def test_a_status_in_either_order_with_its_count(h, status, newest_first):
    tasks = a_mixed_queue(h)
    want = expected(tasks, status, newest_first=newest_first)
    found = h.store.find(HOST, QUEUE, Selection(status=status), newest_first=newest_first,
                         limit=7, offset=2)  # fmt: skip
    assert found.count == len(want)
    assert ids(found) == want[2:9]
    assert found.read == len(found.tasks)  # only the page's records


def test_offset_pages_and_their_cursor_cover_every_task_once(h):
    tasks = a_mixed_queue(h)
    want, seen, after = expected(tasks), [], None
    while True:
        found = h.store.find(HOST, QUEUE, Selection(), limit=4, after=after)
        seen += ids(found)
        if found.next_after is None:
            break
        after = found.next_after
    assert seen == want


def test_an_id_prefix_and_an_exact_id(h):
    tasks = a_mixed_queue(h)
    one = tasks[5]
    prefix = one.id[:1]
    found = h.store.find(HOST, QUEUE, Selection(id_prefix=prefix), limit=100)
    assert ids(found) == expected(tasks, prefix=prefix) and found.count == len(ids(found))
    exact = h.store.find(HOST, QUEUE, Selection(id_prefix=one.id))
    assert ids(exact) == [one.id] and exact.count == 1
    other_status = next(s for s in State if s is not one.status)
    assert h.store.find(HOST, QUEUE, Selection(id_prefix=one.id, status=other_status)).count == 0
    assert h.store.find(HOST, QUEUE, Selection(id_prefix="0" * 16)).tasks == []


def test_a_test_on_the_record_reads_within_its_budget_and_goes_on_from_its_cursor(h):
    tasks = a_mixed_queue(h)

    def wanted(task: Task) -> bool:
        return task.item["url"].endswith("/1")

    selection = Selection(status=State.PENDING, test=wanted)
    pending = expected(tasks, State.PENDING, newest_first=False)
    want = [i for i in pending if wanted(next(t for t in tasks if t.id == i))]
    seen, after, calls = [], None, 0
    while True:
        found = h.store.find(HOST, QUEUE, selection, newest_first=False, limit=50, budget=3,
                             after=after)  # fmt: skip
        calls += 1
        assert found.count is None and found.read <= 3
        seen += ids(found)
        if found.next_after is None:
            break
        after = found.next_after
    assert seen == want and calls >= len(pending) // 3


def test_a_limit_stops_a_test_before_its_budget(h):
    a_mixed_queue(h)
    found = h.store.find(HOST, QUEUE, Selection(test=lambda t: True), limit=2, budget=100)
    assert len(found.tasks) == 2 and found.read == 2
    assert found.next_after == key_of(found.tasks[-1])


def test_until_bounds_a_walk_and_a_cancel_between_chunks_skips_no_task(h):
    """The bulk actions' walk: oldest first, in chunks, up to the newest task counted before
    the operator confirmed; each chunk's tasks leave the status (cancelled), and a task posted
    after the count is left alone."""
    for i in range(10):
        h.post({"n": i}, now=T0 + i)
    newest = h.store.find(HOST, QUEUE, Selection(status=State.PENDING), limit=1).tasks[0]
    late = h.post({"n": "late"}, now=T0 + 100)
    selection, after, cancelled = Selection(status=State.PENDING), None, []
    while True:
        found = h.store.find(HOST, QUEUE, selection, newest_first=False, limit=3, after=after,
                             until=key_of(newest))  # fmt: skip
        for task in found.tasks:
            cancelled.append(h.store.cancel(HOST, QUEUE, task.id, settings=S).id)
        if found.next_after is None:
            break
        after = found.next_after
    assert len(cancelled) == 10 and late.id not in cancelled
    assert h.store.read(HOST, QUEUE, late.id).status is State.PENDING


def test_until_and_after_newest_first(h):
    posted = [h.post({"n": i}, now=T0 + i) for i in range(6)]
    found = h.store.find(HOST, QUEUE, Selection(), after=key_of(posted[4]),
                         until=key_of(posted[1]))  # fmt: skip
    assert ids(found) == [posted[3].id, posted[2].id, posted[1].id]
    one = h.store.find(HOST, QUEUE, Selection(id_prefix=posted[5].id), after=key_of(posted[4]))
    assert one.tasks == []  # the one id, but not past the cursor


def test_counts_per_status_with_the_waiting_pending_ones(h):
    a_mixed_queue(h)
    h.post({"later": 1}, delay_seconds=600, now=T0 + 70_000)
    task = h.post({"retry": 1}, now=T0 + 70_000)
    claimed = h.claim(now=T0 + 80_000)
    while claimed.id != task.id:  # the older pending ones go first: finish them
        h.store.finish(HOST, QUEUE, claimed.id, settings=S, worker="box-1",
                       attempt=claimed.attempts, result=None, now=T0 + 80_000)  # fmt: skip
        claimed = h.claim(now=T0 + 80_000)
    h.store.fail(HOST, QUEUE, task.id, settings=S, worker="box-1", attempt=1, retry=True,
                 now=T0 + 81_000)  # fmt: skip
    counts = h.store.state_counts(HOST, QUEUE, now=T0 + 82_000)
    every = h.store.find(HOST, QUEUE, Selection(), limit=1000).tasks
    for state in State:
        assert counts.of(state) == sum(1 for t in every if t.status is state), state
    assert (counts.delayed, counts.retrying) == (1, 1)
    later = h.store.state_counts(HOST, QUEUE, now=T0 + 10_000_000)
    assert (later.delayed, later.retrying) == (0, 0)


@pytest.mark.files_only("a corrupt file: a row's record is written by the store in a transaction")
def test_a_corrupt_file_is_neither_listed_nor_counted(h):
    task = h.post()
    (h.queue_dir / "done" / "0123456789abcdef.json").write_bytes(b'{"id": "0123')
    assert ids(h.store.find(HOST, QUEUE, Selection())) == [task.id]
    assert h.store.state_counts(HOST, QUEUE).finished == 0


def test_a_queue_that_does_not_exist(h):
    with pytest.raises(NotFound):
        h.store.find(HOST, "nowhere", Selection())
    with pytest.raises(NotFound):
        h.store.state_counts(HOST, "nowhere")


@pytest.mark.files_only("the listing index's race with a rename: one query answers a selection")
def test_a_record_that_moved_since_the_index_looked_is_left_out(h):
    """The race between the index's look and the read, played by hand: the read finds the
    file gone, or of another status, and that one task is left out of the answer."""
    from queues.store.selecting import _read

    task = h.post()
    qd = h.held()
    assert _read(qd, "pending", task.id, Selection(status=State.PENDING)) == task
    assert _read(qd, "pending", task.id, Selection(status=State.CANCELLED)) is None
    assert _read(qd, "done", task.id, Selection()) is None
    (h.queue_dir / "done" / "0123456789abcdef.json").write_bytes(b"{")
    assert _read(qd, "done", "0123456789abcdef", Selection()) is None


def test_claimable_ahead_counts_what_the_claims_take_first(h):
    """Issue 36, item 10 (`why`): the tasks ahead of a pending one, in the claim's order
    (priority, then post order), leaving out the delayed, the waiting, the running and the
    ended; checked against the claims themselves, on both stores."""
    now = T0 + 100_000

    def post(i: int) -> Task:
        delay = 3600 if i % 7 == 3 else 0
        return h.post({"n": i}, now=T0 + (i // 3) * 1000, priority=(i % 5 == 0) * 3,
                      delay_seconds=delay)  # fmt: skip

    posted = [post(i) for i in range(40)]
    h.post({"n": "w"}, now=T0, after=[f"{QUEUE}/{posted[0].id}"])  # waits: never ahead
    for _ in range(4):  # four claimed: no longer ahead of anyone
        assert h.claim(now=T0 + 50_000) is not None
    pending = [t for t in (h.store.read(HOST, QUEUE, p.id) for p in posted)
               if t.status is State.PENDING]  # fmt: skip
    counted = {t.id: h.store.claimable_ahead(HOST, QUEUE, t, now=now) for t in pending}
    order = []  # the claims' own order, one at a time
    while (task := h.claim(now=now)) is not None:
        order.append(task.id)
    for place, task_id in enumerate(order):
        assert counted[task_id] == place
    assert len(order) < len(pending)  # the delayed ones were pending, and not ahead of any


def test_claimable_ahead_counts_the_delayed_whose_time_has_come(h):
    """A delayed task whose time has come is a candidate before any claim has moved it back
    among the ready ones: it counts ahead of the tasks it is claimed before, and one still
    delayed never does."""
    now = T0 + 60_000
    posted = [h.post({"n": i}, now=T0 + i, delay_seconds=(30 if i % 3 == 0 else 0)
                     + (3600 if i % 5 == 4 else 0)) for i in range(30)]  # fmt: skip
    # claims made before the delays ran out pass over the delayed tasks ahead of them (the
    # file store's index sets those aside until their time)
    early = [h.claim(now=T0 + 100) for _ in range(5)]
    assert all(task is not None for task in early)
    pending = [t for t in posted if h.store.read(HOST, QUEUE, t.id).status is State.PENDING]
    counted = {t.id: h.store.claimable_ahead(HOST, QUEUE, t, now=now) for t in pending}
    order = []
    while (task := h.claim(now=now)) is not None:
        order.append(task.id)
    assert {posted[i].id for i in (0, 3, 6)} <= set(order)  # the due delayed were claimed
    for place, task_id in enumerate(order):
        assert counted[task_id] == place
