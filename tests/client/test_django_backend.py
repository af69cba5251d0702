"""The Django backend's results, as django-tasks' own backends give them: enqueue in one
process (tests/django_tasks_project), run `taskhoster_worker` in others, read the result."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from tests.api_live.live import HOST, ROOT

pytestmark = pytest.mark.slow

PROJECT = "tests.django_tasks_project"


def env(live) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": f"{PROJECT}.settings",
        "TASKHOSTER_URL": live.url,
        "TASKHOSTER_TOKEN": live.tokens["paul"],
        "TASKHOSTER_WORKER_TOKEN": live.tokens["wendy"],
    }


def in_project(live, code: str):
    """Run `code` in the project (after django.setup()); it prints one JSON line."""
    script = f"import django, json\ndjango.setup()\nfrom {PROJECT} import tasks\n"
    done = subprocess.run([sys.executable, "-c", script + textwrap.dedent(code)], env=env(live),
                          cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def worker_argv(queue_name: str, name: str, tasks: int) -> list[str]:
    return [sys.executable, "-m", "django", "taskhoster_worker", "--queue-name", queue_name,
            "--worker", name, "--max-tasks", str(tasks)]  # fmt: skip


def work(live, queue_name: str, name: str, tasks: int) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(worker_argv(queue_name, name, tasks), env=env(live), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


READ = """
r = tasks.add.get_backend().get_result({id!r})
print(json.dumps({{
    "status": r.status, "attempts": r.attempts, "worker_ids": r.worker_ids,
    "errors": [[e.exception_class_path, e.traceback] for e in r.errors],
    "value": r.return_value if r.status == "SUCCESSFUL" else None,
    "enqueued": r.enqueued_at.timestamp(),
    "started": r.started_at and r.started_at.timestamp(),
    "last": r.last_attempted_at and r.last_attempted_at.timestamp(),
    "finished": r.finished_at and r.finished_at.timestamp()}}))
"""


def read(live, id: str) -> dict:
    return in_project(live, READ.format(id=id))


def enqueue(live, call: str) -> str:
    return in_project(live, f"print(json.dumps(tasks.{call}.id))")


def test_errors_workers_and_times_of_a_task_that_failed_twice_then_succeeded(
    live, queues, tmp_path
):
    id = enqueue(live, f"fails_until.enqueue({str(tmp_path / 'count')!r}, 2)")
    work(live, "cw", "first-worker", 1)
    retried = read(live, id)
    assert (retried["status"], retried["worker_ids"]) == ("READY", ["first-worker"])
    assert [e[0] for e in retried["errors"]] == ["builtins.ValueError"]
    second = work(live, "cw", "second-worker", 2)
    # its two claims were two attempts of one task
    assert second.stdout.strip() == f"1 task(s) from {HOST}/djcw in 2 attempts"
    done = read(live, id)
    assert (done["status"], done["value"]) == ("SUCCESSFUL", 3)
    assert done["worker_ids"] == ["first-worker", "second-worker", "second-worker"]
    # every attempt's error, the first one's too
    assert [e[0] for e in done["errors"]] == ["builtins.ValueError"] * 2
    assert "attempt 1 fails" in done["errors"][0][1] and "attempt 2 fails" in done["errors"][1][1]
    # started at the first attempt, last attempted at the third
    assert done["started"] == retried["started"] == retried["last"]
    assert done["enqueued"] <= done["started"] < done["last"] <= done["finished"]


def test_a_task_that_calls_sys_exit_fails_with_the_error_of_each_attempt(live, queues):
    id = enqueue(live, "exits.enqueue()")
    # the queue's budget is 3; the worker outlives them all
    done = work(live, "cwexit", "exit-worker", 3)
    failed = read(live, id)
    assert (failed["status"], failed["attempts"]) == ("FAILED", 3)
    assert [e[0] for e in failed["errors"]] == ["builtins.SystemExit"] * 3
    assert "sys.exit(2)" in failed["errors"][-1][1]
    task_id = id.split(":")[1]
    for attempt in (1, 2, 3):  # each logged with its traceback
        assert f"task {task_id}: {PROJECT}.tasks.exits raised on attempt {attempt}" in done.stderr
    assert done.stderr.count("\nSystemExit: 2\n") == 3  # the tracebacks' last lines
    # and the worker loop's line for each attempt's start and end, as `taskhoster work` says
    said = [line.split(f"task {task_id} ", 1)[1] for line in done.stderr.splitlines()
            if f" task {task_id} " in line]  # fmt: skip
    assert said[0] == "received (attempt 1 of 3)", done.stderr
    assert re.fullmatch(r"failed in \d+\.\d\d s \(SystemExit: 2\); retrying in 0 s "
                        r"\(attempt 2 of 3\)", said[1]), done.stderr  # fmt: skip
    assert said[-1].endswith(" s on its last attempt (SystemExit: 2)"), done.stderr


def test_a_worker_token_without_the_worker_role_is_named_in_one_line(live, queues):
    producer_only = {**env(live), "TASKHOSTER_WORKER_TOKEN": live.tokens["paul"]}
    done = subprocess.run(worker_argv("cw", "wrong-token", 1), env=producer_only, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # no traceback
    assert done.stderr.startswith(
        "CommandError: TASKS['default']'s WORKER_TOKEN (or TOKEN, when it has none) lacks the "
        f"worker role on {HOST}/djcw (403 permission_denied: "
    ), done.stderr


def test_a_return_value_that_is_not_json_fails_with_an_error_that_says_so(live, queues):
    id = enqueue(live, "returns_a_set_on_cwodd.enqueue()")
    work(live, "cwodd", "set-worker", 1)  # not retried: the same function returns the same
    failed = read(live, id)
    assert (failed["status"], failed["attempts"]) == ("FAILED", 1)
    [(class_path, text)] = failed["errors"]
    assert class_path == "builtins.TypeError"
    assert "returned a value that is not JSON" in text and "set" in text


def test_a_start_the_server_will_not_record_still_runs_the_task(live, queues, tmp_path):
    marker = tmp_path / "ran"
    id = enqueue(live, f"touches.enqueue({str(marker)!r})")
    # The queue's cap (250 bytes) holds the item but not a progress report naming this worker.
    done = subprocess.run(worker_argv("cwcap", "w" * 200, 1), env=env(live), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert marker.exists()
    assert f"task {id.split(':')[1]}: could not record its start" in done.stderr


def test_inside_a_task_its_result_id_reads_its_own_result_while_it_runs(live, queues, tmp_path):
    id = enqueue(live, f"reads_its_own_result.enqueue({str(tmp_path)!r})")
    worker = subprocess.Popen(worker_argv("cwctx", "ctx-worker", 1), env=env(live), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert worker.poll() is None and time.monotonic() < deadline, worker.communicate()
            time.sleep(0.05)
        running = read(live, id)
        (tmp_path / "release").touch()
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert (running["status"], running["worker_ids"]) == ("RUNNING", ["ctx-worker"])
    assert running["started"] is not None and running["started"] == running["last"]
    done = read(live, id)
    assert done["status"] == "SUCCESSFUL"
    assert done["value"] == {"id": id, "status": "RUNNING", "worker_ids": ["ctx-worker"],
                             "started": True}  # fmt: skip


def test_a_task_that_raises_after_its_cancel_was_requested_ends_cancelled(
    live, clients, queues, tmp_path
):
    id = enqueue(live, f"raises_when_released.enqueue({str(tmp_path)!r})")
    worker = subprocess.Popen([*worker_argv("cwcancel", "cancel-worker", 1), "--lease", "1"],
                              env=env(live), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)  # fmt: skip
    task_id = id.split(":")[1]
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert worker.poll() is None and time.monotonic() < deadline, worker.communicate()
            time.sleep(0.05)
        clients["olga"].cancel(HOST, "djcwcancel", task_id)
        time.sleep(2)  # heartbeats every third of the 1 s lease: the worker learns of it
        (tmp_path / "release").touch()
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    final = clients["olga"].get(HOST, "djcwcancel", task_id)
    assert final["status"] == "cancelled", final
    assert read(live, id)["errors"][0][0] == "builtins.ValueError"


REFUSE = """
from datetime import timedelta
from django.utils import timezone
from taskhoster.django_tasks.compat import InvalidTaskError
deep = []
for _ in range(70):
    deep = [deep]
later = timezone.now() + timedelta(days=2)  # the queue timeout is a day
said = []
for enqueue in (lambda: tasks.add.enqueue({1: "a"}, {}),
                lambda: tasks.add.enqueue(2**64, 1),
                lambda: tasks.add.enqueue(-(2**63) - 1, 1),
                lambda: tasks.add.enqueue([float("nan")], 1),
                lambda: tasks.add.enqueue(a=1, b=deep),
                lambda: tasks.add.using(run_after=later).enqueue(1, 2)):
    try:
        enqueue()
        said.append("enqueued")
    except InvalidTaskError as exc:
        said.append(str(exc))
print(json.dumps(said))
"""


def test_arguments_and_run_afters_the_server_would_change_or_refuse_are_invalid_tasks(
    live, clients
):
    before = clients["olga"].stats(HOST, "djdefault")
    said = in_project(live, REFUSE)
    assert len(said) == 6 and "enqueued" not in said, said
    key, big, small, nan, deep, later = said
    assert "args[0] has the key 1, not a str" in key
    assert "args[0] is an integer outside the 64-bit range" in big
    assert "args[0] is an integer outside the 64-bit range" in small
    assert "args[0][0] is nan" in nan
    assert "kwargs['b']" in deep and "nests deeper than" in deep
    assert "delay" in later and "tests.django_tasks_project.tasks.add" in later
    assert clients["olga"].stats(HOST, "djdefault") == before  # nothing was posted
