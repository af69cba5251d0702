"""What `taskhoster work` says while it works (docs/cli.md): a banner once the server answered,
a line per task's start and end, and `--quiet`, `--verbose` and `--log-format json`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from tests.api_live.live import HOST

from .test_cli_work import ended

pytestmark = pytest.mark.slow

# Writes a line to stderr; exits with the item's `exit` status (after one more stderr line).
COMMAND = """
import json, sys
item = json.load(sys.stdin)
sys.stderr.write("starting %s\\n" % item["n"])
if item.get("exit"):
    sys.stderr.write("no such file: %s\\n" % item["n"])
    sys.exit(item["exit"])
print(json.dumps({"n": item["n"]}))
"""


def work_log(live, clients, queue: str, items: list[dict], *options: str) -> tuple[list, str]:
    """Post the items, run `work` with the options until they ended; their ids and its log."""
    ids = [clients["paul"].post(HOST, queue, item)["id"] for item in items]
    env = {**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens["wendy"]}
    argv = [sys.executable, "-m", "taskhoster.cli", "work", f"{HOST}/{queue}", "--claim-wait",
            "1", "--worker", "box-7", *options, "--", sys.executable, "-c", COMMAND]  # fmt: skip
    worker = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        for id in ids:
            ended(clients, queue, id)
    finally:
        worker.send_signal(signal.SIGTERM)
        _out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    return ids, err


def lines_about(log: str, id: str) -> list[str]:
    return [line.split(f"task {id} ", 1)[1] for line in log.splitlines() if f"task {id} " in line]


def test_work_says_what_it_does_with_each_task(live, clients, queues):
    (good, bad), log = work_log(live, clients, "cwlog", [{"n": 1}, {"n": 2, "exit": 3}])
    first = log.splitlines()[0]
    assert re.fullmatch(
        rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d worker box-7 ready: {HOST}/cwlog at "
        rf"{re.escape(live.url)}, concurrency 1",
        first,
    ), log
    said = lines_about(log, good)
    assert said[0] == "received (attempt 1 of 2)", log
    assert re.fullmatch(r"succeeded in \d+\.\d\d s", said[1]), log
    said = lines_about(log, bad)
    assert said[0] == "received (attempt 1 of 2)", log
    assert re.fullmatch(
        r"failed in \d+\.\d\d s \(exit 3: no such file: 2\); retrying in 0 s \(attempt 2 of 2\)",
        said[1],
    ), log
    assert said[2] == "received (attempt 2 of 2)", log
    assert re.fullmatch(
        r"failed in \d+\.\d\d s on its last attempt \(exit 3: no such file: 2\)", said[3]
    ), log
    assert "stderr" not in log  # the commands' own lines only with --verbose


def test_quiet_says_only_failures_and_verbose_passes_stderr_through(live, clients, queues):
    (good, bad), log = work_log(live, clients, "cwlog", [{"n": 3}, {"n": 4, "exit": 3}], "--quiet")
    assert "ready" not in log and lines_about(log, good) == [], log
    assert [line.split(" (")[0].split(" in ")[0] for line in lines_about(log, bad)] == [
        "failed",
        "failed",
    ], log
    (good,), log = work_log(live, clients, "cwlog", [{"n": 5}], "--verbose")
    said = lines_about(log, good)
    assert said[:2] == ["received (attempt 1 of 2)", "stderr: starting 5"], log
    assert said[2].startswith("succeeded in "), log


def test_quiet_and_verbose_together_are_refused(live):
    env = {**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens["wendy"]}
    argv = [sys.executable, "-m", "taskhoster.cli", "work", f"{HOST}/cwlog", "--quiet",
            "--verbose", "--", "true"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "not allowed with argument" in done.stderr


def test_log_format_json_writes_one_object_per_line(live, clients, queues):
    (good, bad), log = work_log(
        live, clients, "cwlogjson", [{"n": 6}, {"n": 7, "exit": 4}], "--log-format", "json",
        "--verbose",
    )  # fmt: skip
    records = [json.loads(line) for line in log.splitlines()]  # every line is JSON
    assert records[0]["event"] == "ready" and records[0]["worker"] == "box-7"
    events = {id: [r["event"] for r in records if r.get("task") == id] for id in (good, bad)}
    assert events == {good: ["received", "stderr", "succeeded"],
                      bad: ["received", "stderr", "stderr", "failed"]}  # fmt: skip
    failed = next(r for r in records if r.get("task") == bad and r["event"] == "failed")
    assert (failed["level"], failed["error"], failed["attempt"]) == (
        "warning",
        "exit 4: no such file: 7",
        1,
    )
    assert failed["message"].startswith(f"task {bad} failed in ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", failed["at"])


def test_post_wait_says_each_failed_attempt_and_the_wait_before_the_next(live, clients, queues):
    env = {**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens["wendy"]}
    argv = [sys.executable, "-m", "taskhoster.cli", "work", f"{HOST}/cwwait", "--claim-wait",
            "1", "--quiet", "--", sys.executable, "-c", COMMAND]  # fmt: skip
    worker = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        post = [sys.executable, "-m", "taskhoster.cli", "post", f"{HOST}/cwwait",
                '{"n": 8, "exit": 3}', "--wait"]  # fmt: skip
        waited = subprocess.run(post, env={**env, "TASKHOSTER_TOKEN": live.tokens["paul"]},
                                capture_output=True, text=True, timeout=120)  # fmt: skip
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
    assert waited.returncode == 1, waited.stderr
    lines = waited.stderr.strip().splitlines()
    assert len(lines) == 3, waited.stderr
    # the backoff is 1 s, then 4 s (x4 per retry): each pending state is seen
    for attempt, wait, line in zip((1, 2), ("[01]", "[34]"), lines, strict=False):
        assert re.fullmatch(
            rf"taskhoster: task [0-9a-f]+ attempt {attempt} of 3 failed "
            rf"\(exit 3: no such file: 8\); retrying in {wait} s",
            line,
        ), waited.stderr
    # Issue 36: not "failed (attempts)", jargon, but the end in words and the last failure
    assert re.fullmatch(
        r"taskhoster: task [0-9a-f]+ failed: attempts used up \(3 of 3\): exit 3: no such file: 8",
        lines[2],
    ), lines
