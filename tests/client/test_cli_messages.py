"""The command line's refusals name what the user typed (docs/cli.md): the option or variable
that gave a wrong URL, the `--task` option, every bad line of a file; and a refused connection
says it is retrying."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from taskhoster.cli import REFUSED, UNREACHABLE
from tests.api_live.live import HOST, free_port


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "taskhoster.cli", *args],
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def as_user(live, user: str) -> dict[str, str]:
    return {"TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens[user]}


@pytest.mark.parametrize(("option", "value"), [("--lease", "٣"), ("--grace", "nan"),
                                              ("--concurrency", "1_0")])  # fmt: skip
def test_a_number_option_not_in_ascii_digits_is_refused_by_name(option, value):
    done = cli("work", f"{HOST}/q", option, value, "--", "true")
    assert done.returncode == 2
    assert f"argument {option}: the value must be" in done.stderr and "digits 0-9" in done.stderr


@pytest.mark.parametrize("given_by", ["--url", "TASKHOSTER_URL"])
def test_a_url_without_a_scheme_names_where_it_came_from_and_suggests_the_fix(given_by):
    args = ["status", f"{HOST}/cwfile", "0" * 16]
    if given_by == "--url":
        done = cli(*args, "--url", "127.0.0.1:18437", env={"TASKHOSTER_URL": "http://a.b"})
    else:
        done = cli(*args, env={"TASKHOSTER_URL": "127.0.0.1:18437"})
    assert done.returncode == UNREACHABLE
    assert done.stderr == (
        f"taskhoster: {given_by} must be http(s)://host[:port][/prefix], not '127.0.0.1:18437' "
        "(did you mean http://127.0.0.1:18437?)\n"
    )


@pytest.mark.slow
def test_a_refused_connection_says_it_is_retrying_before_it_gives_up():
    done = cli("status", f"{HOST}/cwfile", "0" * 16, "--url", f"http://127.0.0.1:{free_port()}")
    assert done.returncode == UNREACHABLE
    lines = done.stderr.splitlines()
    assert lines[0] == "taskhoster: connection refused; retrying (4 more tries)"
    assert lines[1].startswith("taskhoster: cannot reach http://127.0.0.1:") and len(lines) == 2


@pytest.mark.slow
def test_a_producer_watching_a_queue_is_told_of_the_task_option(live, queues):
    done = cli("watch", f"{HOST}/cwfile", env=as_user(live, "paul"))
    assert done.returncode == 4, done.stderr
    assert "(taskhoster watch --task ID)" in done.stderr and "?task=" not in done.stderr


@pytest.mark.slow
def test_post_from_file_names_every_bad_line_and_posts_nothing(live, clients, queues, tmp_path):
    batch = tmp_path / "batch.jsonl"
    batch.write_text('{"n": 1}\n{nope\n\n{"n": 3}\n[4]\n')
    done = cli("post", f"{HOST}/cwfile", "--from-file", str(batch), env=as_user(live, "paul"))
    assert done.returncode == REFUSED
    lines = done.stderr.splitlines()
    assert lines[0] == f"taskhoster: {batch}: 2 bad line(s), nothing was posted"
    assert lines[1].startswith("  line 2 is not JSON: ")
    assert lines[2] == "  line 5 must be a JSON object (got list)"
    assert len(lines) == 3 and done.stdout == ""
    assert clients["paul"].list(HOST, "cwfile")["results"] == []  # not even line 1
    batch.write_text('{"n": 1}\n\n{"n": 3}\n')
    done = cli("post", f"{HOST}/cwfile", "--from-file", str(batch), env=as_user(live, "paul"))
    assert done.returncode == 0, done.stderr
    posted = [task["id"] for task in clients["paul"].list(HOST, "cwfile")["results"]]
    assert sorted(done.stdout.split()) == sorted(posted) and len(posted) == 2


def test_post_from_a_file_that_cannot_be_read_says_so(tmp_path):
    missing = tmp_path / "missing.jsonl"
    done = cli("post", f"{HOST}/cwfile", "--from-file", str(missing), "--url", "http://a.b")
    assert done.returncode == REFUSED
    assert done.stderr.startswith(f"taskhoster: cannot read {missing}: [Errno 2]")


def line_of(proc: subprocess.Popen[str], timeout: float = 20) -> list[str]:
    """The next line of its output, split; [] when none came within the timeout."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0].split() if lines else []


@pytest.mark.slow
def test_watch_task_shows_a_running_tasks_events_so_far_then_follows_it(live, clients, queues):
    task = clients["paul"].post(HOST, "cwwatch", {"n": 1})
    claimed = clients["wendy"].claim(HOST, "cwwatch", "box-9")
    assert claimed["id"] == task["id"]
    argv = [sys.executable, "-m", "taskhoster.cli", "watch", f"{HOST}/cwwatch", "--task",
            task["id"]]  # fmt: skip
    env = {**os.environ, **as_user(live, "paul")}
    watcher = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    try:
        # its history, said before anything else happens
        posted, claimed = line_of(watcher), line_of(watcher)
        clients["wendy"].result(HOST, "cwwatch", task["id"], "box-9", 1, {"ok": True})
        then = line_of(watcher)
    finally:
        watcher.terminate()
        watcher.communicate(timeout=10)
    assert posted[1:] == ["posted", task["id"], "pending", "attempts=0"]
    assert posted[0].endswith("Z") and "T" in posted[0]
    assert claimed[1:] == ["claimed", task["id"], "processing", "attempts=1", "worker=box-9"]
    assert then[1:4] == ["result", task["id"], "finished"]


@pytest.mark.slow
def test_watch_task_of_an_ended_task_shows_its_events_and_exits(live, clients, queues):
    task = clients["paul"].post(HOST, "cwwatch", {"n": 2})
    clients["paul"].cancel(HOST, "cwwatch", task["id"])
    done = cli("watch", f"{HOST}/cwwatch", "--task", task["id"], env=as_user(live, "paul"))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2, done.stdout  # its two events, nothing more
    posted, cancelled = (line.split()[1:] for line in done.stdout.splitlines())
    assert posted == ["posted", task["id"], "pending", "attempts=0"]
    assert cancelled == ["cancelled", task["id"], "cancelled", "attempts=0"]


@pytest.mark.slow
def test_watch_task_whose_events_the_log_no_longer_holds_says_where_it_stands(
    live, clients, queues
):
    task = clients["paul"].post(HOST, "cwwatch", {"n": 3})
    clients["paul"].cancel(HOST, "cwwatch", task["id"])
    # the day-files pruned: moved aside for the watch, then put back for the other tests
    days = sorted((live.logs / "tasks").glob("*.jsonl"))
    aside = [day.rename(day.with_suffix(".aside")) for day in days]
    try:
        done = cli("watch", f"{HOST}/cwwatch", "--task", task["id"], env=as_user(live, "paul"))
    finally:
        for moved, day in zip(aside, days, strict=True):
            moved.rename(day)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1:] == ["now", task["id"], "cancelled", "attempts=0"]
