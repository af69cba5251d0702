"""A waiting claim whose caller left (the API's `still_wanted`: its client's connection is
closed) takes nothing: asked before each look that could take a task, and at least every
STILL_WANTED_SECONDS while it sleeps, on both stores. The API gives back what a claim took as
its caller left (unclaim: tests/store/test_contract.py); tests/api_live closes real sockets."""

from __future__ import annotations

import threading
import time

from queues.store import State

from .conftest import HOST, QUEUE, SETTINGS

WAIT = 20.0  # the claim's wait: far longer than any of these tests takes
STILL_WANTED_SECONDS = 1.0  # how often a sleeping claim asks (rules.STILL_WANTED_SECONDS)


def _waiting_claim(h, still_wanted) -> tuple[threading.Thread, list]:
    got: list = []

    def run() -> None:
        tasks = h.store.wait_claim(HOST, QUEUE, settings=SETTINGS, worker="box-1",
                                   wait_seconds=WAIT, still_wanted=still_wanted)  # fmt: skip
        got.append((time.monotonic(), tasks))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_a_claim_whose_caller_left_takes_nothing_posted_after(h):
    h.store.create_queue(HOST, QUEUE)
    gone = threading.Event()
    thread, got = _waiting_claim(h, lambda: not gone.is_set())
    time.sleep(0.3)  # it waits
    assert thread.is_alive()
    gone.set()
    task = h.store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="a").task
    thread.join(timeout=STILL_WANTED_SECONDS + 5)
    assert got and got[0][1] == []
    left = h.store.read(HOST, QUEUE, task.id)
    assert (left.status, left.attempts, left.lease) == (State.PENDING, 0, None)
    assert h.event_names(task.id) == ["posted"]


def test_a_claim_whose_caller_left_ends_within_a_look_with_nothing_posted(h):
    h.store.create_queue(HOST, QUEUE)
    gone = threading.Event()
    thread, got = _waiting_claim(h, lambda: not gone.is_set())
    time.sleep(0.3)
    gone.set()
    left_at = time.monotonic()
    thread.join(timeout=WAIT)
    assert got and got[0][1] == []
    assert got[0][0] - left_at < STILL_WANTED_SECONDS + 2  # not at the end of its 20 s


def test_a_claim_whose_caller_is_gone_already_takes_nothing_there(h):
    task = h.post()
    assert h.store.wait_claim(HOST, QUEUE, settings=SETTINGS, worker="box-1", wait_seconds=WAIT,
                              still_wanted=lambda: False) == []  # fmt: skip
    assert h.store.read(HOST, QUEUE, task.id).attempts == 0


def test_a_caller_still_there_gets_the_task_posted_while_it_waits(h):
    h.store.create_queue(HOST, QUEUE)
    thread, got = _waiting_claim(h, lambda: True)
    time.sleep(0.3)
    task = h.store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="a").task
    thread.join(timeout=10)
    assert [t.id for t in got[0][1]] == [task.id]
    assert got[0][1][0].attempts == 1
