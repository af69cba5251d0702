"""The `taskhoster` command line against a real gunicorn: post, wait, work, watch, exit codes."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from taskhoster import run_worker
from taskhoster.cli import AUTH, NOT_FOUND, REFUSED, TASK_FAILED, UNREACHABLE, USAGE

from .live import HOST, free_port

pytestmark = pytest.mark.slow

# A command for `work`: notes it started (a file named for the item's n, holding its pid),
# waits for a release file when the item names one, then prints the doubled n as JSON.
WORKER_SCRIPT = """
import json, os, sys, time
item = json.load(sys.stdin)
folder = item.get("folder")
if folder:
    with open(os.path.join(folder, "started-%s" % item["n"]), "w") as f:
        f.write(str(os.getpid()))
    while item.get("hold") and not os.path.exists(os.path.join(folder, "release")):
        time.sleep(0.05)
if item.get("fail"):
    sys.stderr.write("line one\\nno such file: %s\\n" % item["n"])
    sys.exit(3)
if item.get("text"):
    print("plain text")
else:
    print(json.dumps({"double": item["n"] * 2}))
"""


def cli(live, *args, token="paul", stdin=None, url=None):
    env = {
        **os.environ,
        "TASKHOSTER_URL": url or live.url,
        "TASKHOSTER_TOKEN": live.tokens.get(token, token),
    }
    return subprocess.run(
        [sys.executable, "-m", "taskhoster.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def start_worker(live, queue, *extra, concurrency=1):
    env = {**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens["wendy"]}
    argv = [
        sys.executable,
        "-m",
        "taskhoster.cli",
        "work",
        f"{HOST}/{queue}",
        "--concurrency",
        str(concurrency),
        "--claim-wait",
        "1",
        *extra,
        "--",
        sys.executable,
        "-c",
        WORKER_SCRIPT,
    ]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def eventually(check, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("the condition did not hold within the timeout")


def ended(clients, queue, id):
    task = clients["olga"].get(HOST, queue, id)
    deadline = time.monotonic() + 60
    while task["status"] not in ("finished", "failed", "cancelled"):
        assert time.monotonic() < deadline, task
        task = clients["olga"].get(HOST, queue, id, wait=10, since=task["updatedAt"])
    return task


def stop(proc, timeout=30):
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (the worker has not reaped it yet) is not running either.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[1][0] != "Z"


def test_post_prints_the_id_and_status_reads_it(live, clients):
    done = cli(live, "post", f"{HOST}/cli", '{"n": 1}', "--priority", "5", "--delay", "0")
    assert done.returncode == 0, done.stderr
    id = done.stdout.strip()
    read = cli(live, "status", f"{HOST}/cli", id)
    view = json.loads(read.stdout)
    assert (view["id"], view["status"], view["priority"]) == (id, "pending", 5)
    listed = cli(live, "list", f"{HOST}/cli", "--status", "pending")
    assert id in [json.loads(line)["id"] for line in listed.stdout.splitlines()]
    assert json.loads(cli(live, "cancel", f"{HOST}/cli", id).stdout)["status"] == "cancelled"
    assert json.loads(cli(live, "retry", f"{HOST}/cli", id).stdout)["status"] == "pending"


def item_of(live, id):
    """The item as the store keeps it (the status view does not carry it)."""
    [path] = live.items.rglob(f"{id}*.json")
    return json.loads(path.read_text())["item"]


def test_post_reads_the_item_from_stdin_and_many_from_a_file(live, clients, tmp_path):
    from_stdin = cli(live, "post", f"{HOST}/cli", "-", stdin='{"n": 2}')
    assert item_of(live, from_stdin.stdout.strip()) == {"n": 2}
    lines = tmp_path / "tasks.jsonl"
    lines.write_text('{"n": 3}\n\n{"n": 4}\n')
    done = cli(live, "post", f"{HOST}/cli", "--from-file", str(lines), "--key", "batch")
    ids = done.stdout.split()
    assert [item_of(live, id)["n"] for id in ids] == [3, 4]
    again = cli(live, "post", f"{HOST}/cli", "--from-file", str(lines), "--key", "batch")
    assert again.stdout.split() == ids  # the keys made the repeat a replay


def test_post_wait_prints_the_result_or_exits_1_when_it_failed(live, clients):
    def handler(job):
        if job.item.get("bad"):
            from taskhoster import Fail

            raise Fail("bad input")
        return {"got": job.item["n"]}

    stopper = threading.Event()
    loop = threading.Thread(
        target=run_worker,
        args=(clients["wendy"], HOST, "cliwait", "w", handler),
        kwargs={"wait": 1, "stop_event": stopper},
    )
    loop.start()
    try:
        good = cli(live, "post", f"{HOST}/cliwait", '{"n": 7}', "--wait")
        bad = cli(live, "post", f"{HOST}/cliwait", '{"n": 8, "bad": true}', "--wait")
    finally:
        stopper.set()
        loop.join(30)
    assert (good.returncode, json.loads(good.stdout)) == (0, {"got": 7})
    assert bad.returncode == TASK_FAILED
    assert json.loads(bad.stdout)["error"] == "bad input"
    assert "failed" in bad.stderr


def test_work_reports_json_and_text_output_as_results(live, clients, tmp_path):
    posted = [clients["paul"].post(HOST, "cliwork", {"n": n})["id"] for n in (1, 2)]
    posted.append(clients["paul"].post(HOST, "cliwork", {"n": 3, "text": True})["id"])
    worker = start_worker(live, "cliwork", concurrency=2)
    try:
        finals = [ended(clients, "cliwork", id) for id in posted]
    finally:
        code, err = stop(worker)
    assert code == 0, err
    assert [f["result"] for f in finals] == [{"double": 2}, {"double": 4}, "plain text"]


def test_a_failing_command_is_retried_then_fails_with_its_exit_code_and_stderr(live, clients):
    task = clients["paul"].post(HOST, "clifail", {"n": 5, "fail": True})  # budget 2
    worker = start_worker(live, "clifail")
    try:
        final = ended(clients, "clifail", task["id"])
    finally:
        stop(worker)
    assert (final["status"], final["attempts"]) == ("failed", 2)
    result = final["result"]
    assert result["exitCode"] == 3
    assert result["stderr"].endswith("no such file: 5\n")
    assert result["error"] == "the command exited with status 3: no such file: 5"


def test_a_command_killed_from_outside_fails_the_attempt(live, clients, tmp_path):
    task = clients["paul"].post(HOST, "clikill", {"n": 1, "folder": str(tmp_path), "hold": True})
    worker = start_worker(live, "clikill")
    try:
        started = tmp_path / "started-1"
        eventually(lambda: started.exists() and started.read_text())
        os.kill(int(started.read_text()), signal.SIGKILL)
        final = ended(clients, "clikill", task["id"])
    finally:
        stop(worker)
    assert final["status"] == "failed"  # budget 1: no retry
    assert final["result"]["exitCode"] == -9
    assert "killed by signal 9" in final["result"]["error"]


def test_a_command_whose_task_is_cancelled_is_terminated(live, clients, tmp_path):
    task = clients["paul"].post(HOST, "clicancel", {"n": 1, "folder": str(tmp_path), "hold": True})
    worker = start_worker(live, "clicancel", "--lease", "3", "--grace", "2")
    try:
        started = tmp_path / "started-1"
        eventually(lambda: started.exists() and started.read_text())
        pid = int(started.read_text())
        assert clients["paul"].cancel(HOST, "clicancel", task["id"])["cancelRequested"]
        final = ended(clients, "clicancel", task["id"])
        assert final["status"] == "cancelled"
        assert not alive(pid)
    finally:
        stop(worker)


def test_sigterm_lets_running_commands_finish_and_claims_no_more(live, clients, tmp_path):
    item = {"folder": str(tmp_path), "hold": True}
    posted = [clients["paul"].post(HOST, "clistop", {**item, "n": n})["id"] for n in range(3)]
    worker = start_worker(live, "clistop", concurrency=2)
    eventually(lambda: len(list(tmp_path.glob("started-*"))) == 2)
    worker.send_signal(signal.SIGTERM)
    time.sleep(1.5)  # the signal is handled before the commands are released
    (tmp_path / "release").touch()
    _out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    statuses = sorted(clients["olga"].get(HOST, "clistop", id)["status"] for id in posted)
    assert statuses == ["finished", "finished", "pending"]  # nothing lost


def test_a_second_sigterm_ends_the_commands_and_leaves_the_tasks_to_the_lease(
    live, clients, tmp_path
):
    item = {"folder": str(tmp_path), "hold": True}
    posted = [clients["paul"].post(HOST, "cliabandon", {**item, "n": n})["id"] for n in (1, 2)]
    worker = start_worker(live, "cliabandon", "--lease", "2", "--grace", "1", concurrency=2)
    eventually(
        lambda: all(
            (tmp_path / f"started-{n}").exists() and (tmp_path / f"started-{n}").read_text()
            for n in (1, 2)
        )
    )
    pids = [int((tmp_path / f"started-{n}").read_text()) for n in (1, 2)]
    worker.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    worker.send_signal(signal.SIGTERM)
    _out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    for id in posted:  # it says which tasks come back, and when
        assert re.search(rf"task {id} left running: its lease ends at \d\d:\d\d:\d\d UTC, "
                         "then the sweep puts it back to pending", err), err  # fmt: skip
    eventually(lambda: not any(alive(pid) for pid in pids))
    time.sleep(2.5)  # the 2 s leases run out
    live.sweep()
    finals = [clients["olga"].get(HOST, "cliabandon", id) for id in posted]
    assert [f["status"] for f in finals] == ["pending", "pending"]  # back, not lost


def test_watch_prints_one_line_per_event(live, clients):
    env = {**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens["olga"]}
    watcher = subprocess.Popen(
        [sys.executable, "-m", "taskhoster.cli", "watch", f"{HOST}/cliwatch"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in watcher.stdout], daemon=True
    ).start()
    try:
        # subscribed once it prints a line: a probe posted every half second until it does (a
        # fixed sleep lost the first event when the machine was slow to start the command)
        for _ in range(40):
            clients["paul"].post(HOST, "cliwatch", {"probe": True})
            try:
                lines.get(timeout=0.5)
                break
            except queue.Empty:
                continue
        task = clients["paul"].post(HOST, "cliwatch", {"n": 1})
        clients["paul"].cancel(HOST, "cliwatch", task["id"])
        seen: list[list[str]] = []
        while len(seen) < 2:
            words = lines.get(timeout=20).split()
            if task["id"] in words:
                seen.append(words[1:3])
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.communicate(timeout=10)
    assert seen == [["posted", task["id"]], ["cancelled", task["id"]]]


@pytest.mark.parametrize(
    ("args", "token", "code", "says"),
    [
        (["status", f"{HOST}/cli", "0" * 16], "paul", NOT_FOUND, "404 not_found"),
        (["post", f"{HOST}/nosuchqueue", "{}"], "paul", NOT_FOUND, "404 not_found"),
        (["post", f"{HOST}/cli", "{}"], "th_wrong", AUTH, "401 not_authenticated"),
        (["list", f"{HOST}/cli"], "wendy", AUTH, "403 permission_denied"),
        (["post", f"{HOST}/cli", "[1]"], "paul", REFUSED, "must be a JSON object"),
        (["post", f"{HOST}/cli", "{nope"], "paul", REFUSED, "is not JSON"),
        (
            ["post", f"{HOST}/cli", "{}", "--priority", "500"],
            "paul",
            REFUSED,
            "400 invalid_request",
        ),
        (["post", "no-queue-here", "{}"], "paul", USAGE, "HOST/QUEUE expected"),
        (["work", f"{HOST}/cli"], "wendy", USAGE, "work needs a command"),
        (["work", f"{HOST}/nosuchqueue", "--", "true"], "wendy", NOT_FOUND, "404 not_found"),
        (["watch", f"{HOST}/cliwatch"], "wendy", AUTH, "403 permission_denied"),
        (["post", f"{HOST}/cli", "{}", "--from-file", "x.jsonl"], "paul", USAGE, "not both"),
        (["list", f"{HOST}/cli", "--limit", "0"], "olga", USAGE, "--limit must be"),
        (
            ["work", f"{HOST}/cli", "--concurrency", "0", "--", "true"],
            "wendy",
            USAGE,
            "--concurrency must be",
        ),
    ],
)
def test_errors_are_one_line_with_a_documented_exit_status(live, args, token, code, says):
    done = cli(live, *args, token=token)
    assert done.returncode == code, done.stderr
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_server_that_cannot_be_reached_or_a_wrong_url_exits_3(live):
    closed = cli(live, "status", f"{HOST}/cli", "0" * 16, url=f"http://127.0.0.1:{free_port()}")
    assert closed.returncode == UNREACHABLE and "cannot reach" in closed.stderr
    wrong = cli(live, "status", f"{HOST}/cli", "0" * 16, url="ftp://example.com")
    assert wrong.returncode == UNREACHABLE and "TASKHOSTER_URL must be" in wrong.stderr


def test_every_command_has_help(live):
    for command in ("post", "status", "cancel", "retry", "list", "work", "watch"):
        done = cli(live, command, "--help")
        assert done.returncode == 0 and "usage: taskhoster " + command in done.stdout


def test_work_refuses_a_command_that_does_not_exist(live):
    done = cli(live, "work", f"{HOST}/cli", "--", "/no/such/program", token="wendy")
    assert done.returncode == USAGE and "no such command: /no/such/program" in done.stderr
