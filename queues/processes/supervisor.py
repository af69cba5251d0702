"""Keeps `manage.py serve`'s children running: the web server, the sweep loop, the ingester.

The policy:

- Every child runs in a process group of its own, so a signal to the group reaches what the
  child started (gunicorn's workers), and the terminal's Ctrl-C reaches serve alone, which then
  stops the children in order. A child also gets SIGTERM if serve itself dies (SIGKILL, OOM).
- A child that ends while serve is not stopping is started again after a delay: 1 s, doubled
  after each further death up to 60 s, and back to 1 s once a run has lasted 60 s. Each restart
  is one line on stderr naming the child, how it ended (exit code or signal) and the delay.
  What was left of its process group is sent SIGTERM when it dies, SIGKILL before the restart.
  No child's death stops another: the web server keeps serving while the sweep is restarted,
  and the web server itself is restarted the same way, since a server that does not serve is
  the worst case.
- Except at start: a child that ends within `start_seconds` of its first start (a port that is
  taken, a database not migrated) would only fail again, so serve stops everything and exits 1.
- SIGINT or SIGTERM stops: SIGTERM to every group (gunicorn then closes its event streams and
  finishes its requests within its graceful_timeout), and after `grace` seconds SIGKILL to every
  group that still has a process, so nothing outlives serve. A second SIGINT or SIGTERM kills
  every group at once. serve exits 0 after a stop it was asked for.

honcho stops every process when one ends, which is the behaviour this replaces; circus would
do it, with a daemon, ZeroMQ and a configuration of its own for three processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

FIRST_DELAY = 1.0
LONGEST_DELAY = 60.0
STABLE_SECONDS = 60.0  # a run this long was not a crash loop: the next delay is the first again
TICK = 0.1
PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True)
class Program:
    name: str
    argv: Sequence[str]


@dataclass
class Child:
    program: Program
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    first_run: bool = True
    delay: float = FIRST_DELAY
    restart_at: float | None = None
    groups: set[int] = field(default_factory=set)  # its own and those of its earlier runs


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def _dying_with_parent() -> Callable[[], None]:
    """What a child runs between fork and exec: SIGTERM to it when serve dies, whatever killed
    serve. libc is looked up here, before the fork, so the child only makes the system call."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def ask() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    return ask


class Supervisor:
    """Runs `programs` by the policy above until told to stop; `run()` returns serve's exit
    code. `grace`: how long a stop waits before SIGKILL (longer than gunicorn's
    graceful_timeout, which ends its own workers by then)."""

    def __init__(
        self,
        programs: Sequence[Program],
        *,
        grace: float,
        start_seconds: float = 10.0,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.children = [Child(program) for program in programs]
        self.grace = grace
        self.start_seconds = start_seconds
        self.say = say or self._stderr
        self.stop_requests = 0
        self._in_child = _dying_with_parent()

    @staticmethod
    def _stderr(line: str) -> None:
        sys.stderr.write(f"serve: {line}\n")
        sys.stderr.flush()

    def run(self) -> int:
        previous = {s: signal.signal(s, self._ask_to_stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for child in self.children:
                self._start(child)
            failed = self._watch()
            self._stop_all()
            self._wait_all()
            return 1 if failed else 0
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _ask_to_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requests += 1
        if self.stop_requests > 1:  # the second Ctrl-C: at once
            self._kill_all()

    def _start(self, child: Child) -> None:
        child.restart_at = None
        for pgid in list(child.groups):  # leftovers of the run that died: they would hold its port
            signal_group(pgid, signal.SIGKILL)
        # Our own interpreter and fixed arguments: nothing here comes from a request.
        child.process = subprocess.Popen(  # noqa: S603
            list(child.program.argv), process_group=0, preexec_fn=self._in_child
        )
        child.started = time.monotonic()
        child.groups.add(child.process.pid)

    def _watch(self) -> bool:
        """Restart what dies until a stop is asked for; True when a child failed to start."""
        while not self.stop_requests:
            now = time.monotonic()
            for child in self.children:
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        self._start(child)
                    continue
                assert child.process is not None
                returncode = child.process.poll()
                if returncode is None:
                    continue
                lasted = now - child.started
                signal_group(child.process.pid, signal.SIGTERM)
                if child.first_run and lasted < self.start_seconds:
                    self.say(
                        f"{child.program.name} {how_it_ended(returncode)} {lasted:.1f} s after "
                        "it started: it cannot start; stopping everything"
                    )
                    return True
                self._schedule_restart(child, returncode, lasted, now)
            self._forget_empty_groups()
            time.sleep(TICK)
        return False

    def _schedule_restart(self, child: Child, returncode: int, lasted: float, now: float) -> None:
        if lasted >= STABLE_SECONDS:
            child.delay = FIRST_DELAY
        delay = child.delay
        child.delay = min(delay * 2, LONGEST_DELAY)
        child.first_run = False
        child.restart_at = now + delay
        self.say(
            f"RESTART {child.program.name}: it {how_it_ended(returncode)} after {lasted:.1f} s; "
            f"starting it again in {delay:g} s"
        )

    def _forget_empty_groups(self) -> None:
        for child in self.children:
            running = child.process.pid if child.process and child.restart_at is None else None
            child.groups = {g for g in child.groups if g == running or group_alive(g)}

    def _groups(self) -> set[int]:
        return {pgid for child in self.children for pgid in child.groups}

    def _stop_all(self) -> None:
        for pgid in self._groups():
            signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and self.stop_requests < 2:
            self._reap()
            if not any(group_alive(pgid) for pgid in self._groups()):
                return
            time.sleep(TICK)
        still = sorted(
            child.program.name
            for child in self.children
            if any(group_alive(pgid) for pgid in child.groups)
        )
        if still and self.stop_requests < 2:
            self.say(f"{', '.join(still)} still running {self.grace:g} s after SIGTERM: SIGKILL")
        self._kill_all()

    def _kill_all(self) -> None:
        for pgid in self._groups():
            signal_group(pgid, signal.SIGKILL)
        self._reap()

    def _wait_all(self) -> None:
        """The children's exit statuses, so none is left a zombie behind serve."""
        for child in self.children:
            if child.process is not None:
                # one stuck in the kernel is left to init
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.process.wait(timeout=5)

    def _reap(self) -> None:
        for child in self.children:
            if child.process is not None:
                child.process.poll()
