"""What the worker does with one claimed item: call the task's function, report what came of it."""

from __future__ import annotations

import json
import traceback
from typing import Any

from django.utils.module_loading import import_string

from ..worker import Fail, Job, Retry
from .compat import Task, TaskContext

TRACEBACK_CHARS = 4000


class TaskRaised(Exception):
    """The function raised: the failure body keeps its class path and traceback for
    get_result's `errors`."""

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.details = details


class TaskRaisedRetry(TaskRaised, Retry):
    pass


class TaskRaisedFail(TaskRaised, Fail):
    pass


def run_task(backend: Any, job: Job) -> dict[str, Any]:
    item = job.item if isinstance(job.item, dict) else {}
    path, args, kwargs = item.get("task"), item.get("args", []), item.get("kwargs", {})
    echo = {"task": path, "args": args, "kwargs": kwargs}
    try:
        task = import_string(str(path))
    except ImportError as exc:
        raise Fail(f"no task {path!r} in this project: {exc}") from None
    if not isinstance(task, Task):
        raise Fail(f"{path!r} is not a @task function")
    try:
        if task.takes_context:
            result = backend._result(task, job.id, job.task, echo)
            value = task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
    except Exception as exc:
        text = "".join(traceback.format_exception(exc))[-TRACEBACK_CHARS:]
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        details = {**echo, "exceptionClassPath": kind, "traceback": text}
        # Retried while the task's attempt budget lasts, as any handler's exception is.
        raised = TaskRaisedRetry if job.max_attempts else TaskRaisedFail
        raise raised(f"{type(exc).__name__}: {exc}", details) from exc
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Fail(f"{path} returned a value that is not JSON: {exc}") from None
    return {**echo, "returnValue": value}
