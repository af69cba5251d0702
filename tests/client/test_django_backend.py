"""The Django backend's results, as django-tasks' own backends give them: enqueue in one
process (tests/django_tasks_project), run `taskhoster_worker` in others, read the result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

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


def work(live, queue_name: str, name: str, tasks: int) -> None:
    done = subprocess.run(worker_argv(queue_name, name, tasks), env=env(live), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr


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
