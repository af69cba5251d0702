"""`taskhoster work` against the live server: a terminal's Ctrl-C, and what a command's output
and death become (docs/cli.md)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taskhoster.cli import _signal_name, command_result
from tests.api_live.live import HOST

pytestmark = pytest.mark.slow

# A command for `work`: notes it started, waits for a release file when the item names one,
# writes the item's `out` as it is, or kills itself with the item's `kill` signal.
COMMAND = """
import json, os, sys, time
item = json.load(sys.stdin)
folder = item.get("folder")
if folder:
    open(os.path.join(folder, "started"), "w").close()
    while not os.path.exists(os.path.join(folder, "release")):
        time.sleep(0.05)
if item.get("kill"):
    os.kill(os.getpid(), item["kill"])
sys.stdout.write(item.get("out", '{"done": true}'))
"""


# A command that starts a child of its own (its pid in the item's folder), which holds the
# command's output open, and waits for it (or exits, when the item says so).
PARENT = """
import json, os, subprocess, sys
item = json.load(sys.stdin)
child = subprocess.Popen(["sleep", "300"])
with open(os.path.join(item["folder"], "child"), "w") as f:
    f.write(str(child.pid))
if not item["exit"]:
    child.wait()
"""


def start_work(
    live, queue: str, log: Path, command: str = COMMAND, lease: int = 60
) -> subprocess.Popen[bytes]:
    """`work` in a session of its own, as a shell runs a foreground job in its own group."""
    env = {**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens["wendy"]}
    options = ["--claim-wait", "1", "--grace", "2", "--lease", str(lease)]
    argv = [sys.executable, "-m", "taskhoster.cli", "work", f"{HOST}/{queue}", *options,
            "--", sys.executable, "-c", command]  # fmt: skip
    with log.open("wb") as err:
        return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)  # fmt: skip


def eventually(check, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition did not hold within the timeout"
        time.sleep(0.05)


def ended(clients, queue: str, id: str) -> dict:
    task = clients["olga"].get(HOST, queue, id)
    deadline = time.monotonic() + 60
    while task["status"] not in ("finished", "failed", "cancelled"):
        assert time.monotonic() < deadline, task
        task = clients["olga"].get(HOST, queue, id, wait=10, since=task["updatedAt"])
    return task


def test_ctrl_c_to_the_whole_group_lets_the_running_command_finish(live, clients, queues, tmp_path):
    # The queue allows one attempt: a command killed by the Ctrl-C would fail the task for good.
    task = clients["paul"].post(HOST, "cwsigint", {"folder": str(tmp_path)})
    log = tmp_path / "work.log"
    worker = start_work(live, "cwsigint", log)
    try:
        eventually(lambda: (tmp_path / "started").exists())
        os.killpg(worker.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        eventually(lambda: "stopping" in log.read_text())
        (tmp_path / "release").touch()
        assert worker.wait(30) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    final = ended(clients, "cwsigint", task["id"])
    assert (final["status"], final["result"]) == ("finished", {"done": True}), final


def test_output_loses_only_its_last_newline_and_no_output_is_an_empty_object(
    live, clients, queues, tmp_path
):
    outputs = {"": {}, "  \n": "  ", "a\n\n": "a\n", "\n": "", "[1, 2]\n": [1, 2]}
    ids = {out: clients["paul"].post(HOST, "cwoutput", {"out": out})["id"] for out in outputs}
    worker = start_work(live, "cwoutput", tmp_path / "work.log")
    try:
        results = {out: ended(clients, "cwoutput", id) for out, id in ids.items()}
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    for out, expected in outputs.items():
        assert (results[out]["status"], results[out]["result"]) == ("finished", expected), out


def test_a_command_killed_by_a_signal_says_it_was_and_which(live, clients, queues, tmp_path):
    task = clients["paul"].post(HOST, "cwoutput", {"kill": signal.SIGKILL})
    worker = start_work(live, "cwoutput", tmp_path / "work.log")
    try:
        final = ended(clients, "cwoutput", task["id"])
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    assert final["status"] == "failed"
    assert final["result"]["error"] == "the command was killed by signal 9 (SIGKILL)"
    assert final["result"]["exitCode"] == -9
    assert final["result"]["type"] == "CommandFailed"  # not "CommandRetry" on its last attempt


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper may not have reaped it yet)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("exits", [False, True])
def test_a_cancel_ends_what_the_command_started_too(live, clients, queues, tmp_path, exits):
    task = clients["paul"].post(HOST, "cwgroup", {"folder": str(tmp_path), "exit": exits})
    # a heartbeat every second brings the cancel request
    log = tmp_path / "work.log"
    worker = start_work(live, "cwgroup", log, PARENT, lease=3)
    try:
        eventually(lambda: (tmp_path / "child").exists() and (tmp_path / "child").read_text())
        child = int((tmp_path / "child").read_text())
        clients["olga"].cancel(HOST, "cwgroup", task["id"])
        final = ended(clients, "cwgroup", task["id"])
        eventually(lambda: not running(child), timeout=10)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        if (tmp_path / "child").exists() and running(int((tmp_path / "child").read_text())):
            os.kill(int((tmp_path / "child").read_text()), signal.SIGKILL)
    assert final["status"] == "cancelled"
    assert re.search(rf"task {task['id']} cancelled after \d+\.\d\d s", log.read_text())


def test_a_signal_without_a_name_is_named_by_its_number():
    assert _signal_name(9) == "signal 9 (SIGKILL)"
    assert _signal_name(40) == "signal 40"  # a real-time signal: no name in signal.Signals


@pytest.mark.parametrize(
    ("out", "result"),
    [(b"", None), (b" \n", " "), (b"\n", ""), (b"x\n\n", "x\n"), (b'{"a": 1}\n', {"a": 1})],
)
def test_command_result_keeps_all_but_the_last_newline(out, result):
    assert command_result(out) == result
