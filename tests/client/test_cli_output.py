"""`list`, `status`, `cancel` and `retry` print a table on a terminal and JSON lines otherwise
(docs/cli.md); the terminal is a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest

from taskhoster.task_table import age, preview
from tests.api_live.live import HOST


def run_cli(live, *args: str, terminal: bool, user: str = "paul") -> str:
    """The CLI's standard output, with a pseudo-terminal as its standard output or a pipe."""
    env = {**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens[user]}
    argv = [sys.executable, "-m", "taskhoster.cli", *args]
    if not terminal:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout
    main, sub = pty.openpty()
    proc = subprocess.Popen(argv, env=env, stdout=sub, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)  # fmt: skip
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the other end is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    return out.decode().replace("\r\n", "\n")


@pytest.mark.slow
def test_on_a_terminal_list_and_status_print_a_table_and_json_on_request(live, clients, queues):
    kept = clients["paul"].post(HOST, "cwtable", {"n": 1})
    gone = clients["paul"].post(HOST, "cwtable", {"n": 2})
    shown = run_cli(live, "cancel", f"{HOST}/cwtable", gone["id"], terminal=True).splitlines()
    assert shown[0].split() == ["ID", "STATUS", "ATTEMPTS", "AGE", "WORKER", "PREVIEW"]
    assert shown[1].split() == [gone["id"], "cancelled", "0/3", "0", "s", "ago", "-"]
    listed = run_cli(live, "list", f"{HOST}/cwtable", terminal=True).splitlines()
    assert [row.split()[:3] for row in listed] == [
        ["ID", "STATUS", "ATTEMPTS"],
        [gone["id"], "cancelled", "0/3"],
        [kept["id"], "pending", "0/3"],
    ]
    # the columns line up: each row's status starts where the header's does
    words = ("STATUS", "cancelled", "pending")
    assert {row.index(word) for row, word in zip(listed, words, strict=True)} == {
        listed[0].index("STATUS")
    }
    status = run_cli(live, "status", f"{HOST}/cwtable", kept["id"], "--json", terminal=True)
    assert json.loads(status)["id"] == kept["id"]
    lines = run_cli(live, "list", f"{HOST}/cwtable", "--json", terminal=True).splitlines()
    assert [json.loads(line)["id"] for line in lines] == [gone["id"], kept["id"]]


@pytest.mark.slow
def test_status_of_a_pending_task_says_why_it_is_not_running(live, clients, queues):
    """Issue 36, item 10: the table row, then the read's `why` in one line."""
    task = clients["paul"].post(HOST, "cwtable", {"n": 5}, delay=600)
    shown = run_cli(live, "status", f"{HOST}/cwtable", task["id"], terminal=True).splitlines()
    assert shown[1].split()[:2] == [task["id"], "pending"]
    assert shown[2].startswith("why: Delayed by its post: claimable in ")
    assert len(shown) == 3
    piped = json.loads(run_cli(live, "status", f"{HOST}/cwtable", task["id"], terminal=False))

    # the two reads are apart in time: "claimable in 9 min 59 s" may become "in 9 min 58 s",
    # while the clock time it names stays the same
    def without_countdown(line: str) -> str:
        return re.sub(r"claimable in [^(]*\(", "claimable in (", line)

    assert without_countdown(piped["why"]) == without_countdown(shown[2].removeprefix("why: "))
    clients["paul"].cancel(HOST, "cwtable", task["id"])


@pytest.mark.slow
def test_an_operators_table_names_the_worker_of_each_task(live, clients, queues):
    task = clients["paul"].post(HOST, "cwworker", {"n": 4})
    claimed = clients["wendy"].claim(HOST, "cwworker", "box-7")
    assert claimed["id"] == task["id"]
    try:
        shown = run_cli(live, "status", f"{HOST}/cwworker", task["id"], terminal=True,
                        user="olga").splitlines()  # fmt: skip
        assert shown[0].split()[4] == "WORKER"
        assert shown[1].split()[:3] == [task["id"], "processing", "1/3"]
        assert shown[1].split()[6] == "box-7"
        assert shown[1].index("box-7") == shown[0].index("WORKER")
    finally:
        clients["wendy"].result(HOST, "cwworker", task["id"], "box-7", 1, {"ok": True})


@pytest.mark.slow
def test_piped_list_status_and_retry_print_json_lines(live, clients, queues):
    task = clients["paul"].post(HOST, "cwtable", {"n": 3})
    clients["paul"].cancel(HOST, "cwtable", task["id"])
    retried = run_cli(live, "retry", f"{HOST}/cwtable", task["id"], terminal=False)
    assert json.loads(retried)["status"] == "pending"
    status = run_cli(live, "status", f"{HOST}/cwtable", task["id"], terminal=False)
    assert json.loads(status)["id"] == task["id"]
    listed = run_cli(live, "list", f"{HOST}/cwtable", "--limit", "1", terminal=False)
    assert [json.loads(line)["id"] for line in listed.splitlines()] == [task["id"]]


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0 s ago"), (59.9, "59 s ago"), (60, "1 min ago"), (150, "2 min ago"),
     (3 * 3600 + 5, "3 h ago"), (2 * 86400, "2 d ago"), (-5, "0 s ago")],
)  # fmt: skip
def test_age_says_how_long_ago_in_the_largest_unit(seconds, said):
    assert age(1_000_000_000_000 - seconds * 1000, now=1_000_000_000) == said


@pytest.mark.parametrize(
    ("task", "said"),
    [
        ({"status": "finished", "result": {"bytes": 2048}}, '{"bytes": 2048}'),
        ({"status": "finished", "result": {"text": "x" * 80}}, '{"text": "' + "x" * 37 + "..."),
        ({"status": "failed", "error": "attempts",
          "result": {"error": "the command exited with status 3: boom", "exitCode": 3,
                     "stderr": "one\nboom\n"}}, "attempts used up: exit 3: boom"),
        ({"status": "failed", "error": "attempts", "attempts": 3, "maxAttempts": 3,
          "result": {"exitCode": 3, "stderr": "boom"}}, "attempts used up (3 of 3): exit 3: boom"),
        ({"status": "failed", "result": {"error": "ValueError: bad\nmore"}}, "ValueError: bad"),
        ({"status": "pending", "lastError": {"error": "busy"}}, "last attempt: busy"),
        ({"status": "processing", "progress": {"percent": 50}}, '{"percent": 50}'),
        ({"status": "pending"}, ""),
    ],
)  # fmt: skip
def test_the_preview_says_what_a_task_came_to_in_one_short_line(task, said):
    assert preview(task) == said


@pytest.mark.slow
def test_post_from_a_file_joins_a_group_whose_last_post_closes_it(live, clients, queues, tmp_path):
    lines = tmp_path / "items.jsonl"
    lines.write_text('{"n": 1}\n{"n": 2}\n')
    ids = run_cli(live, "post", f"{HOST}/cwgroups", "--from-file", str(lines), "--group", "g1",
                  "--on-complete-queue", "cwgroupcb", "--on-complete", '{"report": 1}',
                  terminal=False).split()  # fmt: skip
    progress = clients["paul"].group(HOST, "cwgroups", "g1")
    assert progress["state"] == "closed" and progress["posted"] == 2
    for _ in ids:
        task = clients["wendy"].claim(HOST, "cwgroups", worker="w")
        clients["wendy"].result(HOST, "cwgroups", task["id"], worker="w",
                                attempt=task["attempts"], result={})  # fmt: skip
    progress = clients["paul"].group(HOST, "cwgroups", "g1")
    assert progress["state"] == "called_back"
    callback = clients["paul"].get(HOST, "cwgroupcb", progress["callback"]["id"])
    assert callback["status"] == "pending"
    lines.write_text('{"n": 3}\n')
    refused = subprocess.run(
        [sys.executable, "-m", "taskhoster.cli", "post", f"{HOST}/cwgroups", '{"n": 3}',
         "--group", "g1"],
        env={**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens["paul"]},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0 and "group_closed" in refused.stderr


@pytest.mark.slow
def test_a_reader_that_closed_the_pipe_is_a_normal_end(live, clients, queues):
    """`taskhoster list ... | head -1`: head exits after its line, and the list's next write
    meets a closed pipe. Here the reader is gone before the first write, so every run meets it."""
    clients["paul"].post(HOST, "cwoutput", {"n": 1})
    env = {**os.environ, "TASKHOSTER_URL": live.url, "TASKHOSTER_TOKEN": live.tokens["paul"]}
    for command in (["list", f"{HOST}/cwoutput"], ["post", f"{HOST}/cwoutput", '{"n": 2}']):
        read_end, write_end = os.pipe()
        os.close(read_end)
        done = subprocess.run([sys.executable, "-m", "taskhoster.cli", *command], env=env,
                              stdout=write_end, stderr=subprocess.PIPE, timeout=60)  # fmt: skip
        os.close(write_end)
        assert (done.returncode, done.stderr) == (0, b""), command
