"""queues/processes/supervisor.py on small real programs: restarts with a growing delay, a start
that fails, the grace before SIGKILL, the second Ctrl-C, and grandchildren that must not outlive it.

Each supervisor runs in a process of its own (it installs signal handlers, and must be the
parent of what it starts), started in a session of its own so the test signals it alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(600)"
)


def supervise(tmp_path: Path, programs: str, **options: object) -> subprocess.Popen[str]:
    """A supervisor over `programs` (Python source of a list of Program), its stderr piped."""
    script = (
        "import sys\n"
        "from queues.processes.supervisor import Program, Supervisor\n"
        f"programs = {programs}\n"
        f"sys.exit(Supervisor(programs, **{options!r}).run())\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def python(source: str) -> str:
    return f"[sys.executable, '-c', {source!r}]"


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "zombie" not in status


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_a_child_that_keeps_dying_is_restarted_with_a_doubling_delay(tmp_path):
    sup = supervise(tmp_path, f"[Program('flaky', {python('raise SystemExit(3)')})]",
                    grace=5.0, start_seconds=0.0)  # fmt: skip
    try:
        lines = [sup.stderr.readline() for _ in range(3)]
    finally:
        os.killpg(sup.pid, signal.SIGTERM)
        sup.communicate(timeout=30)
    assert [line.split("; ")[-1].strip() for line in lines] == [
        "starting it again in 1 s",
        "starting it again in 2 s",
        "starting it again in 4 s",
    ]
    assert all(
        line.startswith("serve: RESTART flaky: it exited with code 3 after") for line in lines
    )
    assert sup.returncode == 0


def test_a_death_by_signal_is_named_and_the_other_children_run_on(tmp_path):
    sleeper = python("import time; time.sleep(600)")
    sup = supervise(tmp_path, f"[Program('a', {sleeper}), Program('b', {sleeper})]",
                    grace=5.0, start_seconds=0.0)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(children := child_pids(sup.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        first, second = children
        os.kill(first, signal.SIGKILL)
        line = sup.stderr.readline()
        assert line.startswith("serve: RESTART a: it was killed by SIGKILL after")
        assert alive(second)
        deadline = time.monotonic() + 30
        while len(child_pids(sup.pid)) < 2:  # `a` again, after its delay
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert second in child_pids(sup.pid)
    finally:
        os.killpg(sup.pid, signal.SIGTERM)
        sup.communicate(timeout=30)


def test_a_child_that_cannot_start_stops_everything_with_status_1(tmp_path):
    sleeper = python("import time; time.sleep(600)")
    broken = python("raise SystemExit(4)")
    sup = supervise(tmp_path, f"[Program('web', {sleeper}), Program('sweep', {broken})]",
                    grace=5.0, start_seconds=30.0)  # fmt: skip
    _, err = sup.communicate(timeout=60)
    assert sup.returncode == 1
    assert "sweep exited with code 4" in err and "it cannot start; stopping everything" in err
    assert "RESTART" not in err


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    sup = supervise(tmp_path, f"[Program('stubborn', {python(IGNORES_SIGTERM)})]",
                    grace=2.0, start_seconds=0.0)  # fmt: skip
    assert sup.stdout.readline() == "ready\n"
    [stubborn] = child_pids(sup.pid)
    os.killpg(sup.pid, signal.SIGINT)
    _, err = sup.communicate(timeout=60)
    assert sup.returncode == 0
    assert "stubborn still running 2 s after SIGTERM: SIGKILL" in err
    assert not alive(stubborn)


def test_a_second_ctrl_c_kills_at_once(tmp_path):
    sup = supervise(tmp_path, f"[Program('stubborn', {python(IGNORES_SIGTERM)})]",
                    grace=600.0, start_seconds=0.0)  # fmt: skip
    assert sup.stdout.readline() == "ready\n"
    [stubborn] = child_pids(sup.pid)
    os.killpg(sup.pid, signal.SIGINT)
    time.sleep(0.5)
    assert alive(stubborn)  # SIGTERM ignored: the first Ctrl-C waits for the grace
    os.killpg(sup.pid, signal.SIGINT)
    sup.communicate(timeout=60)  # well inside the 600 s grace
    assert sup.returncode == 0 and not alive(stubborn)


def test_a_stop_reaches_the_grandchildren(tmp_path):
    """A child's own children (gunicorn's workers) are in its process group: the stop ends
    them even when the child that started them is gone first."""
    parent = (
        "import subprocess, sys, time; "
        "g = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); "
        "print(g.pid, flush=True); time.sleep(600)"
    )
    sup = supervise(tmp_path, f"[Program('parent', {python(parent)})]",
                    grace=2.0, start_seconds=0.0)  # fmt: skip
    grandchild = int(sup.stdout.readline())
    os.killpg(sup.pid, signal.SIGTERM)
    sup.communicate(timeout=60)
    assert wait_gone([grandchild], 10) == []


def test_children_get_sigterm_when_the_supervisor_is_killed(tmp_path):
    sleeper = python("import time; print('ready', flush=True); time.sleep(600)")
    sup = supervise(tmp_path, f"[Program('orphan', {sleeper})]", grace=5.0, start_seconds=0.0)
    assert sup.stdout.readline() == "ready\n"
    [child] = child_pids(sup.pid)
    sup.kill()
    sup.wait()
    assert wait_gone([child], 10) == []


def child_pids(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return sorted(int(line) for line in found.split())
