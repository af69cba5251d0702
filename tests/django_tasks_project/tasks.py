"""The project's tasks: each test enqueues some and runs `manage.py taskhoster_worker`."""

import sys
import time
from pathlib import Path

from django_tasks import task


@task
def add(a, b):
    return a + b


@task(queue_name="flaky")
def fails_once(marker):
    """Raises on its first attempt (the marker file says it ran), succeeds on the next."""
    path = Path(marker)
    if not path.exists():
        path.write_text("ran")
        raise ValueError("not this time")
    return "second time lucky"


@task(queue_name="fails")
def always_fails():
    raise ValueError("never works")


@task(queue_name="prio")
def record(path, name):
    with open(path, "a") as f:
        f.write(name + "\n")


@task(queue_name="later")
def later():
    return "ran"


@task(queue_name="odd")
def returns_a_set():
    return {1, 2}


@task(queue_name="odd", takes_context=True)
def which_attempt(context, n):
    return {"attempt": context.attempt, "n": n}


@task(queue_name="cw")
def fails_until(marker, failures):
    """Raises on its first `failures` attempts (the marker file counts them), then succeeds."""
    path = Path(marker)
    ran = int(path.read_text()) if path.exists() else 0
    path.write_text(str(ran + 1))
    if ran < failures:
        raise ValueError(f"attempt {ran + 1} fails")
    return ran + 1


@task(queue_name="cwexit")
def exits():
    sys.exit(2)


@task(queue_name="cwodd")
def returns_a_set_on_cwodd():
    return {1, 2}


@task(queue_name="cwctx", takes_context=True)
def reads_its_own_result(context, folder):
    """Reads its own result by the id its context gives, while it runs; holds until released."""
    here = context.task_result.task.get_backend().get_result(context.task_result.id)
    Path(folder, "started").touch()
    while not Path(folder, "release").exists():
        time.sleep(0.05)
    return {
        "id": here.id,
        "status": here.status,
        "worker_ids": here.worker_ids,
        "started": here.started_at is not None,
    }


@task(queue_name="cwcancel")
def raises_when_released(folder):
    Path(folder, "started").touch()
    while not Path(folder, "release").exists():
        time.sleep(0.05)
    raise ValueError("released")


@task(queue_name="cwcap")
def touches(path):
    Path(path).touch()
