"""The project's tasks: each test enqueues some and runs `manage.py taskhoster_worker`."""

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
