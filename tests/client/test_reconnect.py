"""A server restart under a running `taskhoster work` and `taskhoster watch` (real processes, a
real gunicorn stopped and started again on its port): the worker is back within a claim's
pause of the server answering and says so in one line; the watch says what it follows when it
starts, says the break once, backs off quietly, and says once that it is back."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from taskhoster.client import Client
from taskhoster.worker import RECONNECT_PAUSE_SECONDS
from tests.api_live.live import HOST, LiveServer

pytestmark = pytest.mark.slow
# Long enough that a growing pause (0.5, 1, 2, 4, 8, 16 s) would be far past it when the
# server comes back: the worker's tries never pause more than RECONNECT_PAUSE_SECONDS.
OUTAGE_SECONDS = 18


@pytest.fixture
def server(tmp_path):
    live = LiveServer(tmp_path)
    live.prepare()
    live.start()
    yield live
    live.stop()


class Lines:
    """A process's standard error, line by line as it comes, each with the moment it came."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.seen = proc, []
        self._new: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._new.put((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, text: str, timeout: float = 30) -> float:
        """The moment a line holding `text` came (it may have come already)."""
        deadline = time.monotonic() + timeout
        for at, line in self.seen:
            if text in line:
                return at
        while (left := deadline - time.monotonic()) > 0:
            try:
                at, line = self._new.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append((at, line))
            if text in line:
                return at
        raise AssertionError(f"no line with {text!r} in {[line for _, line in self.seen]}")

    def drain(self, seconds: float) -> list[str]:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                self.seen.append(self._new.get(timeout=left))
            except queue.Empty:
                break
        return [line for _, line in self.seen]


def answering(server: LiveServer) -> float:
    """The moment the server first answers an HTTP request (any status: a 401 is an answer)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{server.url}/api/v1/", timeout=1):
                return time.monotonic()
        except urllib.error.HTTPError:
            return time.monotonic()
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the server did not answer within 60 s of its start")


def start(server: LiveServer, user: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TASKHOSTER_URL": server.url, "TASKHOSTER_TOKEN": server.tokens[user]}
    return subprocess.Popen([sys.executable, "-m", "taskhoster.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_work_and_watch_come_back_after_a_server_restart_and_say_so_once(server):
    worker = start(server, "wendy", "work", f"{HOST}/cliwork", "--worker", "box-r", "--", "cat")
    watcher = start(server, "olga", "watch", f"{HOST}/cliwork")
    work_log, watch_log = Lines(worker), Lines(watcher)
    try:
        work_log.wait_for("worker box-r ready")
        watch_log.wait_for(f"taskhoster: following {HOST}/cliwork at {server.url} (Ctrl-C ends)")
        server.stop()
        work_log.wait_for("claim on")  # the first failed claim: said once
        time.sleep(OUTAGE_SECONDS)
        server.start()  # back once its socket accepts; its workers may still be starting
        up = answering(server)
        back = work_log.wait_for("reconnected to")
        # a claim's pause at most, and the claim itself, on a shared and busy machine
        assert back - up < RECONNECT_PAUSE_SECONDS + 2, f"back {back - up:.1f} s after the server"
        task = Client(server.url, server.tokens["paul"]).post(HOST, "cliwork", {"n": 7})
        work_log.wait_for(f"task {task['id']} succeeded")
        watch_log.wait_for(f"back: following {HOST}/cliwork again after")
        said = work_log.drain(0.5)
        heard = watch_log.drain(0.5)
    finally:
        for proc in (worker, watcher):
            proc.terminate()
            proc.communicate(timeout=30)
    assert len([line for line in said if "claim on" in line]) == 1, said
    assert len([line for line in said if "reconnected to" in line]) == 1, said
    assert len([line for line in heard if "stream broke" in line]) == 1, heard
    assert len([line for line in heard if "back: following" in line]) == 1, heard
    assert len(heard) == 3, heard  # following, broke, back: nothing between
