"""The chaos run's nemesis tells the deaths it caused from the ones it did not: a sweep loop, a
worker or a web worker that died by itself is recorded (and fails the run), one it killed is
not. Real processes stand in for the server's: small Python programs, so the test needs no
server, no database and no store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.nemesis import RECENT_START_SECONDS, Fleet, Nemesis
from chaos.server import Server

pytestmark = pytest.mark.slow

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
# a stand-in gunicorn master: two sleeping children, replaced when one dies
MASTER = [
    sys.executable,
    "-c",
    "import subprocess, sys, time\n"
    "argv = [sys.executable, '-c', 'import time; time.sleep(600)']\n"
    "kids = [subprocess.Popen(argv) for _ in range(2)]\n"
    "while True:\n"
    "    kids = [k if k.poll() is None else subprocess.Popen(argv) for k in kids]\n"
    "    time.sleep(0.05)\n",
]


class StandInServer(Server):
    """The run's Server with its sweep loop a sleeper (started for real, in its own session)."""

    def start_sweeper(self, interval: float) -> None:
        self.sweeper = subprocess.Popen(SLEEPER, start_new_session=True)


class StandInFleet(Fleet):
    def start(self, slot) -> None:
        slot.generation += 1
        slot.name = f"w{slot.index}-g{slot.generation}"
        slot.proc = subprocess.Popen(SLEEPER, start_new_session=True)
        slot.started, slot.paused_until = time.monotonic(), None


@pytest.fixture
def nemesis(tmp_path: Path):
    server = StandInServer(tmp_path, lease=2, web_workers=2, threads=4)
    server.gunicorn = subprocess.Popen(MASTER, start_new_session=True)
    server.start_sweeper(1.0)
    fleet = StandInFleet(tmp_path, server, size=2, lease=2)
    fleet.start_all()
    nemesis = Nemesis(tmp_path, server, fleet, seed=1, kills=0, pauses=0, web_kills=0,
                      sweep_kills=0, pause_seconds=1.0, sweep_interval=1.0,
                      max_gap=1.0)  # fmt: skip
    deadline = time.monotonic() + 30
    while len(server.web_pids()) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    nemesis.tend()  # it has seen the web workers
    yield nemesis
    fleet.kill_all()
    server.stop()


def tend_until(nemesis: Nemesis, done, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline
        nemesis.tend()
        time.sleep(0.05)


def test_what_the_nemesis_kills_is_no_unexplained_death(nemesis):
    first_sweeper = nemesis.server.sweeper
    time.sleep(RECENT_START_SECONDS + 0.1)  # it kills only workers that had time to report
    assert nemesis.sweep() and nemesis.kill() and nemesis.web()
    assert nemesis.server.sweeper is not first_sweeper
    tend_until(nemesis, lambda: len(nemesis.server.web_pids()) == 2)
    for _ in range(20):
        nemesis.tend()
        time.sleep(0.05)
    assert nemesis.deaths == []


def test_a_sweep_loop_that_died_by_itself_is_recorded_and_started_again(nemesis):
    crashed = nemesis.server.sweeper
    os.kill(crashed.pid, signal.SIGKILL)  # not the nemesis: as if it crashed
    tend_until(nemesis, lambda: nemesis.deaths)
    assert nemesis.deaths == ["sweep loop (killed by SIGKILL)"]
    assert nemesis.server.sweeper is not crashed and nemesis.server.sweeper.poll() is None
    assert '"op": "unexplained_death", "what": "sweep loop"' in (Path(nemesis.log.name).read_text())


def test_a_worker_and_a_web_worker_that_died_by_themselves_are_recorded(nemesis):
    slot = nemesis.fleet.slots[0]
    name = slot.name
    os.kill(slot.proc.pid, signal.SIGTERM)
    web_pid = nemesis.server.web_pids()[0]
    os.kill(web_pid, signal.SIGKILL)
    tend_until(nemesis, lambda: len(nemesis.deaths) == 2)
    assert sorted(nemesis.deaths) == [f"web worker pid {web_pid}",
                                      f"worker {name} (killed by SIGTERM)"]  # fmt: skip


def test_a_pause_skips_workers_that_have_not_written_their_flag_yet(nemesis):
    """On a loaded machine a worker can take over a second to start: it holds nothing yet."""
    time.sleep(RECENT_START_SECONDS + 0.1)
    assert not any((nemesis.fleet.dir / slot.flag).exists() for slot in nemesis.fleet.slots)
    assert nemesis.pause() is False
    assert all(slot.paused_until is None for slot in nemesis.fleet.slots)
