"""What the worker does with one claimed item: call the task's function, report what came of it."""

from __future__ import annotations

import logging
import traceback
from typing import Any

from django.utils.module_loading import import_string

from ..client import ApiError
from ..worker import Fail, Job, Retry
from .compat import Task, TaskContext
from .history import TRACEBACK_CHARS, History, of_attempt
from .json_values import json_problem

log = logging.getLogger("taskhoster.django_tasks")
# A result's id is QUEUE:TASK_ID:FUNCTION_PATH: the status view carries neither the queue nor
# the item, and get_result must know where to look and which function the task runs.
ID_SEPARATOR = ":"


class TaskRaised(Exception):
    """The function raised: the failure body keeps its class path and the attempts' history,
    whose `errors` end with this attempt's traceback, for get_result's `errors`."""

    kind = "TaskRaised"  # the body's type, retried or not (not TaskRaisedRetry on the last)

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.details = details


class TaskRaisedRetry(TaskRaised, Retry):
    pass


class TaskRaisedFail(TaskRaised, Fail):
    pass


def result_id_of(queue: str, task_id: str, path: str) -> str:
    return ID_SEPARATOR.join((queue, task_id, path))


def run_task(backend: Any, job: Job) -> dict[str, Any]:
    item = job.item if isinstance(job.item, dict) else {}
    path, args, kwargs = item.get("task"), item.get("args", []), item.get("kwargs", {})
    echo = {"task": path, "args": args, "kwargs": kwargs}
    history = of_attempt(job.task, job.worker)
    try:
        task = import_string(str(path))
    except ImportError as exc:
        raise _raised(TaskRaisedFail, exc, echo, history,
                      f"no task {path!r} in this project: {exc}") from None  # fmt: skip
    if not isinstance(task, Task):
        not_a_task = TypeError(f"{path!r} is not a @task function")
        raise _raised(TaskRaisedFail, not_a_task, echo, history, str(not_a_task))
    _announce(job, history)
    try:
        if task.takes_context:
            own_id = result_id_of(job.queue, job.id, str(path))
            result = backend._result(task, own_id, job.task, echo, history)
            value = task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
    except KeyboardInterrupt:  # the operator ends the worker; the lease brings the task back
        raise
    except BaseException as exc:  # SystemExit too: the function's failure, not the worker's
        # Logged as the worker loop logs a handler's exception: a Retry it reports is not.
        log.warning("task %s: %s raised on attempt %s", job.id, path, job.attempt, exc_info=exc)
        # Retried while the task's attempt budget lasts, as any handler's exception is.
        raised = TaskRaisedRetry if job.max_attempts else TaskRaisedFail
        raise _raised(raised, exc, echo, history, f"{type(exc).__name__}: {exc}") from exc
    problem = json_problem(value, "the return value")
    if problem is not None:
        # As Django's own backends do: the serialisation's error is the task's, and no retry
        # of the same function would return anything else.
        not_json = TypeError(f"{path} returned a value that is not JSON: {problem}")
        raise _raised(TaskRaisedFail, not_json, echo, history, str(not_json))
    return {**echo, "returnValue": value, **history.as_body()}


def _raised(
    kind: type[TaskRaised], exc: BaseException, echo: dict[str, Any], history: History, text: str
) -> TaskRaised:
    class_path = f"{type(exc).__module__}.{type(exc).__qualname__}"
    trace = "".join(traceback.format_exception(exc))[-TRACEBACK_CHARS:]
    # The traceback once, as the newest of `errors` (a copy beside it showed it twice more)
    details = {**echo, "exceptionClassPath": class_path,
               **history.failed(class_path, trace).as_body()}  # fmt: skip
    return kind(text, details)


def _announce(job: Job, history: History) -> None:
    """Say this attempt started, and where: get_result of a running task reads it from the
    status view's progress (which holds no lease, so no worker)."""
    try:
        job.progress(history.as_body())
    except (ApiError, OSError) as exc:  # only the running result's account is the poorer
        log.warning("task %s: could not record its start: %s", job.id, exc)
