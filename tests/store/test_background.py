"""The background of a process (queues/store/background.py): items handed on are run in order
by one thread, which ends when it has none; a failing item is logged and the next one runs;
a forked child starts with none of its parent's items."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import threading

from queues.store import StorageUnavailable
from queues.store.background import Background


def test_items_run_in_order_in_one_thread_that_ends_when_it_has_none():
    ran, threads = [], set()

    def run(item):
        ran.append(item)
        threads.add(threading.current_thread().name)

    background = Background(run, name="test-background")
    background.hand([1, 2])
    background.hand([3])
    assert background.wait(10)
    assert ran == [1, 2, 3] and threads == {"test-background"}
    assert not any(t.name == "test-background" for t in threading.enumerate() if t.is_alive())
    background.hand([4])  # a new thread for new items
    assert background.wait(10) and ran == [1, 2, 3, 4]


def test_a_failing_item_is_logged_and_the_next_one_runs(caplog):
    ran = []

    def run(item):
        if item == "disk":
            raise StorageUnavailable("The store could not write: Read-only file system.")
        if item == "bug":
            raise ValueError("a bug")
        ran.append(item)

    background = Background(run, name="test-background")
    with caplog.at_level(logging.WARNING, logger="taskhoster.store"):
        background.hand(["disk", "a", "bug", "b"])
        assert background.wait(10)
    assert ran == ["a", "b"]
    disk, bug = [r for r in caplog.records if r.name == "taskhoster.store"]
    assert disk.levelno == logging.WARNING and disk.exc_info is None  # one line, no traceback
    assert "left to the sweep" in disk.getMessage()
    assert bug.levelno == logging.ERROR and bug.exc_info is not None  # a bug: its traceback


def _child(background, ran, out):
    background.hand(["child"])
    out.put((background.wait(10), list(ran)))


def test_a_forked_child_runs_its_own_items_only():
    ran, gate, parent = [], threading.Event(), os.getpid()

    def run(item):
        if os.getpid() == parent:
            gate.wait(10)
        ran.append((os.getpid(), item))

    background = Background(run, name="test-background")
    background.hand(["parent"])  # held at the gate while the child forks
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child, args=(background, ran, out))
    child.start()
    # its own item ran, by a thread of its own (its parent's is not there), and only its own
    assert out.get(timeout=30) == (True, [(child.pid, "child")])
    child.join(30)
    gate.set()
    assert background.wait(10)
    assert ran == [(os.getpid(), "parent")]


def test_wait_says_false_while_an_item_still_runs():
    gate = threading.Event()
    background = Background(lambda item: gate.wait(10), name="test-background")
    background.hand([1])
    assert background.wait(0.05) is False
    gate.set()
    assert background.wait(10) is True
