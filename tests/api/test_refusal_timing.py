"""A refusal takes as long whatever it hides: another tenant's queue, a queue of the caller's
host it holds no role on, a name that is no queue and a host that is none all answer the same
404 in the same time; so do another producer's group and a group never posted to.

The caller's roles are read by name (queues.api.context), never by looking the queue up, so
the four queue refusals take one code path; a group another producer posted is refused by the
store as it finds no group (the PostgreSQL query returns no row, the file store reads only the
group's owner file). Before, an existing queue was memoized and a missing one asked the
database every time (three times slower), and another producer's group had its counts, its
callback and its closing read before the refusal.

Timed, so made robust on a shared machine: the kinds are interleaved request by request in a
shuffled order, each request's time is taken relative to its round's, the median of those
ratios over hundreds of rounds is compared, and the slowest may be at most TOLERANCE times the
fastest (the fixed paths differ by a few microseconds of a 250 us request; the old ones by
15% for a group, and by 70% to 200% for a queue).
"""

from __future__ import annotations

import contextlib
import gc
import random
import statistics
import time
from collections.abc import Iterator

import pytest

from queues.api import memo
from tests.api.conftest import HOST, OTHER_HOST, OTHER_QUEUE, QUEUE, url

pytestmark = pytest.mark.django_db
TOLERANCE = 1.08
WARM_UP = 20


def relative_medians(client, urls: dict[str, str], rounds: int) -> dict[str, float]:
    """Each URL's time relative to its round's: in every round each URL is asked once, in a
    shuffled order, and its time divided by the median of that round's times; the answer is
    the median of those ratios over the rounds (a burst of load slows a whole round, and
    cancels out)."""
    for _ in range(WARM_UP):
        for path in urls.values():
            assert client.get(path).status_code == 404, path
    ratios: dict[str, list[float]] = {kind: [] for kind in urls}
    order = list(urls)
    shuffle = random.Random(33).shuffle
    with _no_collector():
        for _ in range(rounds):
            shuffle(order)
            took = {}
            for kind in order:
                start = time.perf_counter_ns()
                client.get(urls[kind])
                took[kind] = time.perf_counter_ns() - start
            middle = statistics.median(took.values())
            for kind, ns in took.items():
                ratios[kind].append(ns / middle)
    return {kind: statistics.median(found) for kind, found in ratios.items()}


@contextlib.contextmanager
def _no_collector() -> Iterator[None]:
    """No garbage collection in the middle of a sample."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def assert_alike(found: dict[str, float]) -> None:
    fastest, slowest = min(found.values()), max(found.values())
    assert slowest <= fastest * TOLERANCE, {kind: f"{ratio:.3f}" for kind, ratio in found.items()}


@pytest.mark.parametrize("memo_seconds", [600, 0], ids=["memoized", "no memo"])
def test_every_queue_a_caller_may_not_use_is_refused_in_the_same_time(
    world, settings, memo_seconds
):
    settings.TASKHOSTER_API_MEMO_SECONDS = memo_seconds
    memo.forget_all()
    alice = world.client("alice")  # a producer on task.example.com/resize alone
    urls = {
        "another host's queue": url(*OTHER_HOST, "stats"),
        "a queue of her host": url(*OTHER_QUEUE, "stats"),
        "no such queue": url(OTHER_HOST[0], "nothing-here", "stats"),
        "no such host": url("nohost.example.net", QUEUE, "stats"),
    }
    assert_alike(relative_medians(alice, urls, rounds=300))


@pytest.mark.parametrize("who", ["alice", "bob"], ids=["a producer", "a worker"])
def test_another_producers_group_is_refused_in_the_time_of_a_missing_one(world, who):
    """paula's group is no business of alice (a producer) nor of bob (a worker)."""
    world.post(by="paula", group="paulas")
    urls = {
        "another producer's group": url(HOST, QUEUE, "groups/paulas"),
        "no such group": url(HOST, QUEUE, "groups/nothing-here"),
    }
    assert_alike(relative_medians(world.client(who), urls, rounds=600))
