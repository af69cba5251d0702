"""The Django Tasks API backend, in a small Django project (tests/django_tasks_project), against a
real gunicorn: enqueue in one process, run `taskhoster_worker` in another, read the result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from .live import HOST, ROOT

pytestmark = pytest.mark.slow


def env(live):
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.django_tasks_project.settings",
        "TASKHOSTER_URL": live.url,
        "TASKHOSTER_TOKEN": live.tokens["paul"],
        "TASKHOSTER_WORKER_TOKEN": live.tokens["wendy"],
    }


def in_project(live, code):
    """Run `code` in the project (after django.setup()); it prints one JSON line."""
    script = "import django, json\ndjango.setup()\nfrom tests.django_tasks_project import tasks\n"
    done = subprocess.run(
        [sys.executable, "-c", script + textwrap.dedent(code)],
        env=env(live),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def work(live, queue_name, tasks, *extra):
    argv = [
        sys.executable,
        "-m",
        "django",
        "taskhoster_worker",
        "--queue-name",
        queue_name,
        "--max-tasks",
        str(tasks),
        *extra,
    ]
    done = subprocess.run(
        argv, env=env(live), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


def result_of(live, id):
    return in_project(
        live,
        f"""
        r = tasks.add.get_backend().get_result({id!r})
        value = r.return_value if r.status == "SUCCESSFUL" else None
        print(json.dumps({{"status": r.status, "value": value, "args": r.args,
                          "attempts": r.attempts, "task": r.task.name,
                          "errors": [e.exception_class_path for e in r.errors]}}))
    """,
    )


def test_enqueue_run_the_worker_and_read_the_result(live):
    enqueued = in_project(
        live,
        """
        r = tasks.add.enqueue(2, 3)
        print(json.dumps({"id": r.id, "status": r.status}))
    """,
    )
    assert enqueued["status"] == "READY"
    assert result_of(live, enqueued["id"])["status"] == "READY"
    work(live, "default", 1)
    assert result_of(live, enqueued["id"]) == {
        "status": "SUCCESSFUL",
        "value": 5,
        "args": [2, 3],
        "attempts": 1,
        "task": "add",
        "errors": [],
    }


def test_a_task_that_raises_is_retried_then_succeeds_or_fails_for_good(live, tmp_path):
    once = in_project(
        live,
        f"""
        print(json.dumps({{"id": tasks.fails_once.enqueue({str(tmp_path / "m")!r}).id}}))
    """,
    )
    work(live, "flaky", 2)  # budget 3, no backoff
    read = result_of(live, once["id"])
    assert (read["status"], read["value"], read["attempts"]) == (
        "SUCCESSFUL",
        "second time lucky",
        2,
    )
    never = in_project(live, 'print(json.dumps({"id": tasks.always_fails.enqueue().id}))')
    work(live, "fails", 2)  # budget 2
    read = result_of(live, never["id"])
    assert (read["status"], read["attempts"]) == ("FAILED", 2)
    assert read["errors"][-1] == "builtins.ValueError"


def test_a_higher_priority_runs_first(live, tmp_path):
    log = tmp_path / "order"
    in_project(
        live,
        f"""
        for name, priority in (("low", -10), ("high", 50), ("middle", 0)):
            tasks.record.using(priority=priority).enqueue({str(log)!r}, name)
        print("{{}}")
    """,
    )
    work(live, "prio", 3)
    assert log.read_text().split() == ["high", "middle", "low"]


def test_run_after_becomes_a_delay(live, clients):
    enqueued = in_project(
        live,
        """
        from datetime import timedelta
        from django.utils import timezone
        when = timezone.now() + timedelta(seconds=3)
        r = tasks.later.using(run_after=when).enqueue()
        print(json.dumps({"id": r.id, "when": when.timestamp() * 1000}))
    """,
    )
    _, id, _ = enqueued["id"].split(":")
    view = clients["olga"].get(HOST, "djlater", id)
    assert view["availableAt"] >= enqueued["when"] - 1  # not before run_after
    assert clients["wendy"].claim(HOST, "djlater", "early", wait=0) is None
    work(live, "later", 1)  # waits until it is due
    assert result_of(live, enqueued["id"])["value"] == "ran"
    assert time.time() * 1000 >= enqueued["when"]


def test_arguments_that_are_not_json_are_refused_clearly(live):
    refused = in_project(
        live,
        """
        from taskhoster.django_tasks.compat import InvalidTaskError
        try:
            tasks.add.enqueue(object(), 1)
        except InvalidTaskError as exc:
            print(json.dumps({"error": str(exc)}))
    """,
    )
    assert "arguments must be JSON values" in refused["error"]
    assert "tests.django_tasks_project.tasks.add" in refused["error"]


def test_a_task_that_takes_the_context_gets_its_attempt(live):
    enqueued = in_project(live, 'print(json.dumps({"id": tasks.which_attempt.enqueue(7).id}))')
    work(live, "odd", 1)
    assert result_of(live, enqueued["id"])["value"] == {"attempt": 1, "n": 7}


def test_what_the_worker_cannot_run_or_report_fails_the_task_for_good(live, clients):
    enqueued = in_project(live, 'print(json.dumps({"id": tasks.returns_a_set.enqueue().id}))')
    not_a_task = clients["paul"].post(HOST, "djodd", {"task": "os.getcwd", "args": []})
    missing = clients["paul"].post(HOST, "djodd", {"task": "no.such.module.f", "args": []})
    work(live, "odd", 3)
    read = result_of(live, enqueued["id"])
    assert (read["status"], read["attempts"]) == ("FAILED", 1)
    for task, says in ((not_a_task, "is not a @task function"), (missing, "no task")):
        final = clients["olga"].get(HOST, "djodd", task["id"])
        assert (final["status"], final["attempts"]) == ("failed", 1)
        assert says in final["result"]["error"]
    view = clients["olga"].get(HOST, "djodd", enqueued["id"].split(":")[1])
    assert "returned a value that is not JSON" in view["result"]["error"]


def test_get_result_of_an_unknown_or_malformed_id_says_it_does_not_exist(live):
    answers = in_project(
        live,
        """
        from taskhoster.django_tasks.compat import TaskResultDoesNotExist
        said = []
        for id in ("nonsense", "djdefault:0000000000000000:tests.django_tasks_project.tasks.add",
                   "djdefault:0000000000000000:no.such.task"):
            try:
                tasks.add.get_backend().get_result(id)
            except TaskResultDoesNotExist:
                said.append("does not exist")
        print(json.dumps(said))
    """,
    )
    assert answers == ["does not exist"] * 3


def test_the_worker_command_refuses_a_backend_that_is_not_taskhosters(live):
    argv = [sys.executable, "-m", "django", "taskhoster_worker", "--backend", "nosuch"]
    done = subprocess.run(argv, env=env(live), cwd=ROOT, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 1 and "no TASKS backend 'nosuch'" in done.stderr
