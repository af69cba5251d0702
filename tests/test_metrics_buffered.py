"""The server's histograms kept in process memory (queues/metrics/buffered.py): what a write
gives the metric, threads, and in real processes with prometheus_client's multiprocess files,
the background writer, the exit, a fork and a SIGKILL."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.multiprocess import MultiProcessCollector

from queues.metrics import buffered

ROOT = Path(__file__).resolve().parent.parent
BOUNDS = (0.05, 0.1, 1.0)
SEEN = (0.01, 0.05, 0.07, 0.1, 0.5, 1.0, 5.0)  # on each bound, between, below and above all


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in registry.collect() for s in f.samples
            if not s.name.endswith("_created")}  # fmt: skip


def histogram(name: str) -> tuple[CollectorRegistry, Histogram]:
    registry = CollectorRegistry()
    made = Histogram(name, "test", ["route", "status"], registry=registry, buckets=BOUNDS)
    return registry, made


def test_a_write_gives_the_metric_what_observing_it_directly_gives():
    direct_registry, direct = histogram("h")
    registry, metric = histogram("h")
    kept = buffered.BufferedHistogram(lambda: metric, BOUNDS, lambda key: (key[0], f"{key[1]}xx"))
    for seconds in SEEN:
        direct.labels("a", "2xx").observe(seconds)
        kept.observe(("a", 2), seconds)
    direct.labels("b", "4xx").observe(0.2)
    kept.observe(("b", 4), 0.2)
    assert not [v for (name, _), v in samples(registry).items() if name == "h_count"]
    kept.write()
    assert samples(registry) == samples(direct_registry)
    kept.observe(("a", 2), 0.03)  # totals, set again: the next write adds nothing twice
    direct.labels("a", "2xx").observe(0.03)
    kept.write()
    kept.write()
    assert samples(registry) == samples(direct_registry)


def test_threads_observing_at_once_lose_nothing():
    registry, metric = histogram("t")
    kept = buffered.BufferedHistogram(lambda: metric, BOUNDS, lambda key: key)

    def observe() -> None:
        for _ in range(5000):
            kept.observe(("r", "2xx"), 0.07)

    threads = [threading.Thread(target=observe) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept.write()
    found = samples(registry)
    assert found[("t_count", (("route", "r"), ("status", "2xx")))] == 40_000
    assert found[("t_bucket", (("le", "0.05"), ("route", "r"), ("status", "2xx")))] == 0
    assert found[("t_bucket", (("le", "0.1"), ("route", "r"), ("status", "2xx")))] == 40_000


def test_a_failed_write_is_said_once_and_made_again_by_the_next(caplog):
    registry, metric = histogram("f")
    refusals = [RuntimeError("no room"), RuntimeError("still no room")]

    def made() -> Histogram:
        if refusals:
            raise refusals.pop(0)
        return metric

    kept = buffered.BufferedHistogram(made, BOUNDS, lambda key: key)
    kept.observe(("r", "2xx"), 0.5)
    with caplog.at_level(logging.ERROR, logger=buffered.__name__):
        buffered.write_all()
        buffered.write_all()
    assert [r.getMessage() for r in caplog.records].count(
        "could not write the server's figures; trying again") == 1  # fmt: skip
    buffered.write_all()
    assert samples(registry)[("f_count", (("route", "r"), ("status", "2xx")))] == 1


# --- in processes of their own, with prometheus_client's multiprocess files -----------------

CHILD = """
import os, sys, time
from prometheus_client import Histogram
from queues.metrics import buffered
metric = Histogram("served", "test", ["route"], buckets=(0.1, 1.0))
kept = buffered.BufferedHistogram(lambda: metric, (0.1, 1.0), lambda key: (key,))
"""


def child(script: str, figures: Path) -> subprocess.Popen[str]:
    figures.mkdir(exist_ok=True)
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(figures)}
    code = CHILD + textwrap.dedent(script)
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip


def counted(figures: Path) -> dict[str, float]:
    """{route: requests counted} over every process's files in `figures`."""
    found: dict[str, float] = {}
    for family in MultiProcessCollector(None, path=str(figures)).collect():
        for s in family.samples:
            if s.name == "served_count":
                found[s.labels["route"]] = s.value
    return found


def test_a_process_that_exits_writes_what_it_kept(tmp_path):
    """Its writer's first turn is a second away: only the exit's write can have done it."""
    done = child("for s in (0.05, 0.5, 2): kept.observe('a', s)\n", tmp_path / "figures")
    assert done.wait(timeout=60) == 0
    assert counted(tmp_path / "figures") == {"a": 3}


def test_a_running_process_writes_within_about_a_second_and_a_sigkill_keeps_that(tmp_path):
    running = child(
        """
        kept.observe('a', 0.05)
        kept.observe('a', 0.5)
        print('observed', flush=True)
        time.sleep(600)
        """,
        tmp_path / "figures",
    )
    try:
        assert running.stdout is not None and running.stdout.readline() == "observed\n"
        deadline = time.monotonic() + 60  # only ends a hang: the write is due within a second
        while counted(tmp_path / "figures") != {"a": 2}:
            assert time.monotonic() < deadline, "the background writer never wrote"
            time.sleep(0.05)
    finally:
        running.send_signal(signal.SIGKILL)
        running.wait(timeout=60)
    assert counted(tmp_path / "figures") == {"a": 2}


def test_a_forked_child_writes_its_own_figures_not_its_parents(tmp_path):
    done = child(
        """
        for _ in range(5):
            kept.observe('parent', 0.05)  # not written yet when the child is made
        pid = os.fork()
        if pid == 0:
            kept.observe('child', 0.05)
            sys.exit(0)  # a normal exit: its own write
        os.waitpid(pid, 0)
        """,
        tmp_path / "figures",
    )
    assert done.wait(timeout=60) == 0
    assert counted(tmp_path / "figures") == {"parent": 5, "child": 1}
    files = sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert len(files) == 2 and all(f.startswith("histogram_") for f in files)
