"""Flow control on claims, on both stores: maxProcessing, maxPerKey (claims go past the tasks a
key holds back), the rate limit's token bucket, and why a pending task is held (heldBy); exact
across racing processes, checked from the event log."""

from __future__ import annotations

import itertools
import multiprocessing as mp
from dataclasses import replace

import pytest

from queues.store import InvalidRequest, PostEntry
from queues.store.limits import HELD_KEY, HELD_MAX, HELD_RATE, Claimed, held_reason

from . import procs
from .conftest import HOST, QUEUE, SETTINGS, T0

LONG = replace(SETTINGS, lease_seconds=3600, queue_seconds=10 * 86400)


def _claim(h, settings, *, now, max_tasks=1):
    return h.store.claim(HOST, QUEUE, settings=settings, worker="box-1", now=now,
                         max_tasks=max_tasks)  # fmt: skip


def _finish(h, task, settings, *, now):
    h.store.finish(HOST, QUEUE, task.id, settings=settings, worker="box-1",
                   attempt=task.attempts, result={"ok": 1}, now=now)  # fmt: skip


def test_max_processing_caps_what_is_in_processing(h):
    capped = replace(LONG, max_processing=2)
    for n in range(4):
        h.post({"n": n}, settings=capped, now=T0 + n)
    first = _claim(h, capped, now=T0 + 10, max_tasks=5)
    assert len(first) == 2
    held = _claim(h, capped, now=T0 + 11)
    assert held == [] and isinstance(held, Claimed) and held.held_by == HELD_MAX
    _finish(h, first[0], capped, now=T0 + 12)
    again = _claim(h, capped, now=T0 + 13, max_tasks=5)
    assert [t.item["n"] for t in again] == [2]
    assert h.count("pending") == 1


def test_a_key_at_its_cap_is_claimed_past_in_order(h):
    keyed = replace(LONG, max_per_key=1)
    h.post({"n": "a1"}, settings=keyed, now=T0, concurrency_key="cust-a")
    h.post({"n": "a2"}, settings=keyed, now=T0 + 1, concurrency_key="cust-a")
    h.post({"n": "b1"}, settings=keyed, now=T0 + 2, concurrency_key="cust-b")
    h.post({"n": "free"}, settings=keyed, now=T0 + 3)
    got = [_claim(h, keyed, now=T0 + 10 + n) for n in range(3)]
    assert [[t.item["n"] for t in tasks] for tasks in got] == [["a1"], ["b1"], ["free"]]
    held = _claim(h, keyed, now=T0 + 20)
    assert held == [] and held.held_by == HELD_KEY
    # a batch claim takes one of a key, never two
    _finish(h, got[0][0], keyed, now=T0 + 21)
    assert [t.item["n"] for t in _claim(h, keyed, now=T0 + 22, max_tasks=5)] == ["a2"]


def test_one_batch_claim_takes_no_more_of_a_key_than_its_cap(h):
    keyed = replace(LONG, max_per_key=2)
    for n in range(5):
        h.post({"n": n}, settings=keyed, now=T0 + n, concurrency_key="k")
    h.post({"n": "other"}, settings=keyed, now=T0 + 9, concurrency_key="j")
    got = _claim(h, keyed, now=T0 + 10, max_tasks=10)
    keys = sorted(t.concurrency_key for t in got)
    assert keys == ["j", "k", "k"]


def test_a_batch_claim_past_the_held_tasks_of_a_key_still_fills_its_room(h):
    """Six tasks of one key lead the queue, then four of other keys: a claim of four takes the
    key's one and the three after the held five (not only what its first look-up held)."""
    keyed = replace(LONG, max_per_key=1)
    for n in range(6):
        h.post({"n": f"a{n}"}, settings=keyed, now=T0 + n, concurrency_key="a")
    for n in range(4):
        h.post({"n": f"o{n}"}, settings=keyed, now=T0 + 10 + n, concurrency_key=f"o{n}")
    got = _claim(h, keyed, now=T0 + 20, max_tasks=4)
    assert [t.item["n"] for t in got] == ["a0", "o0", "o1", "o2"]
    assert h.count("pending") == 6


def test_a_held_task_is_not_failed_by_waiting(h):
    keyed = replace(LONG, max_per_key=1, lease_seconds=3600)
    first = h.post({"n": 1}, settings=keyed, now=T0, concurrency_key="k")
    waiting = h.post({"n": 2}, settings=keyed, now=T0 + 1, concurrency_key="k")
    _claim(h, keyed, now=T0 + 10)
    h.store.sweep_queue(HOST, QUEUE, keyed, now=T0 + 60_000)
    assert h.store.read(HOST, QUEUE, waiting.id).status.value == "pending"
    assert h.store.read(HOST, QUEUE, first.id).status.value == "processing"


def test_the_rate_limit_takes_tokens_and_says_when_the_next_comes(h):
    rated = replace(LONG, rate_count=10, rate_seconds=1)  # a bucket of one, a token per 100 ms
    for n in range(3):
        h.post({"n": n}, settings=rated, now=T0 + n)
    assert len(_claim(h, rated, now=T0 + 10, max_tasks=3)) == 1
    held = _claim(h, rated, now=T0 + 40)
    assert held == [] and held.held_by == HELD_RATE
    assert held.retry_after == pytest.approx(0.07)
    assert len(_claim(h, rated, now=T0 + 110)) == 1
    assert len(_claim(h, rated, now=T0 + 150)) == 0


def test_tokens_a_claim_did_not_use_stay_in_the_bucket(h):
    rated = replace(LONG, rate_count=50, rate_seconds=1)  # a bucket of five
    for n in range(2):
        h.post({"n": n}, settings=rated, now=T0 + n)
    assert len(_claim(h, rated, now=T0 + 10, max_tasks=10)) == 2
    for n in range(5):
        h.post({"n": 10 + n}, settings=rated, now=T0 + 11)
    assert len(_claim(h, rated, now=T0 + 10, max_tasks=10)) == 3  # five less the two
    state = h.store.flow_state(HOST, QUEUE, settings=rated, now=T0 + 10)
    assert state.tokens == pytest.approx(0) and state.capacity == 5


def test_held_by_says_why_a_pending_task_waits(h):
    both = replace(LONG, max_per_key=1, max_processing=2)
    h.post({"n": 1}, settings=both, now=T0, concurrency_key="k")
    by_key = h.post({"n": 2}, settings=both, now=T0 + 1, concurrency_key="k")
    free = h.post({"n": 3}, settings=both, now=T0 + 2)
    _claim(h, both, now=T0 + 10)
    state = h.store.flow_state(HOST, QUEUE, settings=both, now=T0 + 11)
    assert state.processing == 1 and state.key_counts == {"k": 1}
    assert held_reason(state, both, by_key, T0 + 11) == HELD_KEY
    assert held_reason(state, both, free, T0 + 11) is None
    _claim(h, both, now=T0 + 12)
    state = h.store.flow_state(HOST, QUEUE, settings=both, now=T0 + 13)
    later = h.post({"n": 4}, settings=both, now=T0 + 14)
    assert held_reason(state, both, later, T0 + 14) == HELD_MAX
    assert held_reason(state, LONG, later, T0 + 14) is None  # no limits, nothing holds it


def test_the_concurrency_key_is_kept_in_the_record(h):
    task = h.post({"n": 1}, now=T0, concurrency_key="customer-7")
    assert h.store.read(HOST, QUEUE, task.id).concurrency_key == "customer-7"
    assert task.status_view()["concurrencyKey"] == "customer-7"
    [answer] = h.store.post_many(HOST, QUEUE, [PostEntry(item={"n": 2}, concurrency_key="c")],
                                 settings=SETTINGS, posted_by="alice", now=T0 + 1)  # fmt: skip
    assert h.store.read(HOST, QUEUE, answer.task.id).concurrency_key == "c"


@pytest.mark.parametrize("key", ["", 7, "x" * 201, "tab\there", ["a"]])
def test_a_bad_concurrency_key_is_refused_and_nothing_is_written(h, key):
    before = h.stored()
    with pytest.raises(InvalidRequest, match="concurrencyKey"):
        h.post({"n": 1}, now=T0, concurrency_key=key)
    with pytest.raises(InvalidRequest, match="concurrencyKey") as refused:
        entries = [PostEntry(item={}), PostEntry(item={}, concurrency_key=key)]
        h.store.post_many(HOST, QUEUE, entries, settings=SETTINGS, posted_by="alice", now=T0)
    assert refused.value.index == 1
    assert h.stored() == before


# -- across processes ----------------------------------------------------------------------------

WORKERS, TASKS = 8, 120


def _most_at_once(h, key_of) -> tuple[int, dict[str, int]]:
    """From the event log: the most tasks between their `claimed` line and their `progress`
    line at once, in all and per key (those spans lie inside each task's time in processing)."""
    running: dict[str, str | None] = {}
    most, most_per_key = 0, {}
    for line in h.events():
        if line["event"] == "claimed":
            running[line["id"]] = key_of[line["id"]]
            most = max(most, len(running))
            key = key_of[line["id"]]
            if key is not None:
                now = sum(1 for k in running.values() if k == key)
                most_per_key[key] = max(most_per_key.get(key, 0), now)
        elif line["event"] == "progress":
            running.pop(line["id"], None)
    return most, most_per_key


@pytest.mark.slow
def test_eight_processes_never_exceed_max_processing_nor_max_per_key(h):
    limited = replace(procs.LONG, max_processing=3, max_per_key=1)
    key_of = {}
    for n in range(TASKS):
        key = f"k{n % 4}" if n % 3 else None  # four keys, and tasks with none
        task = h.store.post(HOST, QUEUE, {"n": n}, settings=limited, posted_by="a",
                            now=T0 + n, concurrency_key=key).task  # fmt: skip
        key_of[task.id] = key
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(target=procs.limited_worker, args=(h.opener(), limited, f"w{i}", start, out))
        for i in range(WORKERS)
    ]
    for p in workers:
        p.start()
    start.set()
    reports = [out.get(timeout=300) for _ in workers]
    for p in workers:
        p.join(30)
        assert p.exitcode == 0
    assert [errors for _, _, errors in reports] == [[]] * WORKERS
    assert sum(done for _, done, _ in reports) == TASKS
    most, per_key = _most_at_once(h, key_of)
    assert 2 <= most <= 3  # reached (the workers race), never passed
    assert per_key == {"k0": 1, "k1": 1, "k2": 1, "k3": 1}


@pytest.mark.slow
def test_across_processes_no_task_waits_while_its_key_and_the_queue_have_room(h):
    """Three processes (this one and two kept open, each with its own view of the queue's flow)
    claim and finish in turns, in a seeded random order, on a queue of maxProcessing 5 and
    maxPerKey 2: every claim takes exactly what a model says is claimable then (in claim order,
    past the tasks whose key is full, up to the queue's room and the claim's max), so nothing
    another process claimed or finished is missed or counted twice, and no task the limits
    allow is left pending."""
    import random
    from collections import Counter

    most, per_key = 5, 2
    limited = replace(procs.LONG, max_processing=most, max_per_key=per_key)
    rng = random.Random(27)
    pending, key_of, running = [], {}, set()
    for n in range(80):
        key = rng.choice(["a", "b", "c", "d", "e", None])
        task = h.store.post(HOST, QUEUE, {"n": n}, settings=limited, posted_by="a",
                            now=T0 + n, concurrency_key=key).task  # fmt: skip
        pending.append(task.id)
        key_of[task.id] = key

    def claimable(max_tasks):
        room = min(max_tasks, most - len(running))
        counts = Counter(key_of[i] for i in running)
        got = []
        for task_id in pending:
            key = key_of[task_id]
            if len(got) >= room:
                break
            if key is None or counts[key] < per_key:
                got.append(task_id)
                counts[key] += 1
        return got

    ctx = mp.get_context("spawn")
    hands = []
    for _ in range(2):
        orders, answers = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=procs.flow_hand, args=(h.opener(), limited, orders, answers))
        p.start()
        hands.append((p, orders, answers))

    def by(who, order):
        if who == 2:  # this process
            verb, arg = order
            if verb == "claim":
                return [t.id for t in h.store.claim(HOST, QUEUE, settings=limited,
                                                    worker="hand", max_tasks=arg)]  # fmt: skip
            for task_id, attempt in arg:
                h.store.finish(HOST, QUEUE, task_id, settings=limited, worker="hand",
                               attempt=attempt, result={"ok": 1})  # fmt: skip
            return []
        hands[who][1].put(order)
        return hands[who][2].get(timeout=60)

    claims = 0
    try:
        for step in range(70):
            who = rng.randrange(3)
            if running and rng.random() < 0.45:
                done = rng.sample(sorted(running), rng.randint(1, len(running)))
                assert by(who, ("finish", [(i, 1) for i in done])) == [], step
                running.difference_update(done)
                continue
            max_tasks = rng.choice([1, 2, 3, 10])
            want = claimable(max_tasks)
            got = by(who, ("claim", max_tasks))
            assert got == want, (step, who, max_tasks, got, want)
            claims += len(got)
            running.update(got)
            pending = [i for i in pending if i not in got]
    finally:
        for p, orders, _ in hands:
            orders.put(None)
            p.join(30)
    assert claims > 40  # the limits were met again and again, and room came back


@pytest.mark.slow
@pytest.mark.files_only("the file store's steps; a PostgreSQL claim is one transaction")
def test_a_crash_at_each_step_of_taking_a_token_never_gives_two_nor_keeps_one(tmp_path):
    """A bucket of one token (10 a second) and three pending tasks; a claim of two dies at each
    of its disk-changing calls in turn. At that instant at most the one token is spent (the
    dead claim's and a new claim's together), and a window later the bucket is full again."""
    from .conftest import Harness

    rated = replace(procs.LONG, rate_count=10, rate_seconds=1)
    ctx = mp.get_context("fork")
    for k in range(1, 60):
        h = Harness(tmp_path / f"k{k}", fsync=True)
        for n in range(3):
            h.post({"n": n}, settings=rated, now=T0 + n)
        child = ctx.Process(target=procs.crash_in_limited_claim, args=(h.config, rated, T0 + 10, k))
        child.start()
        child.join(30)
        assert child.exitcode in (0, 137)
        h.reopen()
        leased = [
            t for t in h.store.list_tasks(HOST, QUEUE, status="processing").tasks
            if t.lease is not None
        ]  # fmt: skip
        again = _claim(h, rated, now=T0 + 10, max_tasks=2)
        assert len(leased) + len(again) <= 1, (k, leased, again)
        assert h.count("pending") + h.count("processing") == 3  # no task lost
        state = h.store.flow_state(HOST, QUEUE, settings=rated, now=T0 + 1010)
        assert state.tokens == pytest.approx(1.0), k
        h.close()
        if child.exitcode == 0:
            break
    else:
        pytest.fail("the claim never completed")
    assert k > 4, k


@pytest.mark.slow
def test_four_processes_claiming_keep_to_the_rate_from_above_and_below(h):
    """50 a second, four claimers for ten seconds with tasks to spare: in every second of the
    event log's `claimed` times, at most the rate plus the bucket's five; and over the ten
    seconds from the first claim, at least 95% of the 500 the rate allows (the bucket's
    refill is not lost to the claimers' waits). Each claim asks for up to the bucket's five,
    so that a claimer late to wake (a loaded machine; a PostgreSQL claim takes 15-30 ms here,
    and a limited queue's claims take its row's lock one after another) takes what filled
    meanwhile: the refill is lost only while all four are late by more than the bucket."""
    import datetime as dt

    rated = replace(procs.LONG, rate_count=50, rate_seconds=1)
    for n in range(7):
        h.store.post_many(HOST, QUEUE, [PostEntry(item={"n": n}) for n in range(100)],
                          settings=rated, posted_by="a", now=T0 + n)  # fmt: skip
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    claimers = [
        ctx.Process(target=procs.rated_claimer, args=(h.opener(), rated, 10.0, start, out, 5))
        for _ in range(4)
    ]
    for p in claimers:
        p.start()
    start.set()
    reports = [out.get(timeout=120) for _ in claimers]
    for p in claimers:
        p.join(30)
        assert p.exitcode == 0
    assert [errors for _, errors in reports] == [[]] * 4
    times = sorted(
        dt.datetime.fromisoformat(line["at"].replace("Z", "+00:00")).timestamp() * 1000
        for line in h.events()
        if line["event"] == "claimed"
    )
    assert len(times) == sum(got for got, _ in reports) > 0
    assert len(times) < 700  # tasks to spare: the rate held the claimers back, not the queue
    busiest = max(sum(1 for u in times if t <= u < t + 1000) for t in times)
    assert busiest <= 50 + 5, busiest
    in_ten_seconds = sum(1 for u in times if u < times[0] + 10_000)
    # A stretch with no claim at all longer than ten tokens' time (200 ms) is the machine's: no
    # claimer ran (a CI run under load once saw 469). Its refill past the bucket is excused; a
    # refill that is slow, or waits that lose it, still show in gaps a token or two long.
    early = [u for u in times if u < times[0] + 10_000]
    stalled_ms = sum(max(0.0, b - a - 200) for a, b in itertools.pairwise(early))
    excused = stalled_ms * 50 / 1000
    assert in_ten_seconds + excused >= 0.95 * 500, (in_ten_seconds, excused)


@pytest.mark.slow
def test_claimers_killed_while_taking_tokens_never_pass_the_rate_nor_hold_the_lock(h):
    """Two claimers of a rate-limited queue SIGKILLed again and again, wherever they are: no
    lock outlives them (a claim after them is answered), and the event log's claims stay
    within the bucket and its refill."""
    import datetime as dt
    import os
    import signal
    import time

    rated = replace(procs.LONG, rate_count=20, rate_seconds=1)  # a bucket of two
    h.store.post_many(HOST, QUEUE, [PostEntry(item={"n": n}) for n in range(100)],
                      settings=rated, posted_by="a", now=T0)  # fmt: skip
    ctx = mp.get_context("spawn")
    claimed = ctx.Queue()
    for round_ in range(4):
        kids = [ctx.Process(target=procs.limited_endless_claimer,
                            args=(h.opener(), rated, claimed)) for _ in range(2)]  # fmt: skip
        for p in kids:
            p.start()
        claimed.get(timeout=60)  # they are claiming
        time.sleep(0.05 * (round_ + 1))
        for p in kids:
            os.kill(p.pid, signal.SIGKILL)
            p.join(30)
            assert p.exitcode == -signal.SIGKILL
    # no lock outlived them: a claim now is answered, from a full enough bucket in time
    got = h.store.wait_claim(HOST, QUEUE, settings=rated, worker="after", wait_seconds=10)
    assert len(got) == 1
    times = sorted(
        dt.datetime.fromisoformat(line["at"].replace("Z", "+00:00")).timestamp() * 1000
        for line in h.events()
        if line["event"] == "claimed"
    )
    assert len(times) >= 5  # each round claimed, and the claim after them
    busiest = max(sum(1 for u in times if t <= u < t + 1000) for t in times)
    assert busiest <= 20 + 2, busiest
