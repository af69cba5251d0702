"""TaskhosterBackend: `enqueue` posts to a taskhoster queue, `get_result` reads its status view."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.module_loading import import_string

from ..client import ApiError, Client
from .compat import (
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from .history import UNKNOWN_WORKER, History, of_view
from .json_values import json_problem
from .runner import ID_SEPARATOR, result_id_of

# taskhoster's status -> Django's (a cancelled task did not run to its end: FAILED).
STATUSES = {
    "pending": TaskResultStatus.READY,
    "processing": TaskResultStatus.RUNNING,
    "finished": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}
# The post's refusals of the task as given (a delay past the queue timeout, an item over the
# queue's cap or against its schema): Django's InvalidTaskError, not a transport error.
REFUSED_TASK = (400, 413, 422)


class TaskhosterBackend(BaseTaskBackend):  # type: ignore[misc]
    supports_defer = True  # run_after: a delay
    supports_priority = True  # the same -100..100 range as taskhoster's
    supports_get_result = True  # from any process: the server keeps the status

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = self.options
        missing = [name for name in ("URL", "HOST") if not options.get(name)]
        if missing:
            raise InvalidTaskError(f"TASKS[{alias!r}]['OPTIONS'] needs {', '.join(missing)}")
        self.host: str = options["HOST"]
        self.queue_names: dict[str, str] = dict(options.get("QUEUE_NAMES", {}))
        # a task's module path -> the keyword argument whose value is its concurrencyKey
        self.concurrency_keys: dict[str, str] = dict(options.get("CONCURRENCY_KEYS", {}))
        timeout = float(options.get("TIMEOUT", 30))
        self.client = Client(options["URL"], options.get("TOKEN"), timeout=timeout)
        worker_token = options.get("WORKER_TOKEN", options.get("TOKEN"))
        self.worker_client = Client(options["URL"], worker_token, timeout=timeout)

    def queue_for(self, queue_name: str) -> str:
        """The taskhoster queue a Django queue name posts to (the same name unless mapped)."""
        return self.queue_names.get(queue_name, queue_name)

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        values = [(f"args[{i}]", v) for i, v in enumerate(args)]
        values += [(f"kwargs[{k!r}]", v) for k, v in kwargs.items()]
        for where, value in values:
            problem = json_problem(value, where)
            if problem is not None:
                raise InvalidTaskError(
                    f"{task.module_path}: {problem}; arguments must be JSON values (str, int, "
                    "float, bool, None, lists and dicts with str keys), to travel to the worker"
                )
        item = {"task": task.module_path, "args": list(args), "kwargs": dict(kwargs)}
        delay = None
        if task.run_after is not None:
            delay = max(math.ceil((task.run_after - timezone.now()).total_seconds()), 0)
        queue = self.queue_for(task.queue_name)
        try:
            view = self.client.post(self.host, queue, item, delay=delay, priority=task.priority,
                                    concurrency_key=self.concurrency_key(task, kwargs))  # fmt: skip
        except ApiError as exc:
            if exc.status in REFUSED_TASK:  # the task as given, not the server or the token
                raise InvalidTaskError(f"{task.module_path}: {exc.detail}") from exc
            raise
        return self._result(task, result_id_of(queue, view["id"], task.module_path), view, item)

    def concurrency_key(self, task: Task, kwargs: Any) -> str | None:
        """The task's concurrencyKey: the value of the keyword argument OPTIONS'
        CONCURRENCY_KEYS names for its module path, as a string (None: no key)."""
        name = self.concurrency_keys.get(task.module_path)
        if name is None or kwargs.get(name) is None:
            return None
        return str(kwargs[name])

    def get_result(self, result_id: str) -> TaskResult:
        parts = result_id.split(ID_SEPARATOR, 2)
        if len(parts) != 3 or not all(parts):
            raise TaskResultDoesNotExist(result_id)
        queue, id, path = parts
        try:
            view = self.client.get(self.host, queue, id)
            task = import_string(path)
        except ApiError as exc:
            if exc.status == 404:
                raise TaskResultDoesNotExist(result_id) from None
            raise
        except ImportError:
            raise TaskResultDoesNotExist(f"{result_id}: no task {path} here") from None
        # The status view does not carry the item: the arguments come back with the worker's
        # report (empty before it).
        body = view.get("result")
        item = body if isinstance(body, dict) else {}
        return self._result(task, result_id, view, item)

    def _result(
        self,
        task: Task,
        result_id: str,
        view: dict[str, Any],
        item: dict[str, Any],
        history: History | None = None,
    ) -> TaskResult:
        """The TaskResult of a status view (or of the claimed record, inside the task)."""
        status = STATUSES[view["status"]]
        history = history or of_view(view)
        attempts = int(view.get("attempts") or 0)
        # one per attempt (TaskResult.attempts counts them), those of lost reports unknown
        workers = [*history.worker_ids, *[UNKNOWN_WORKER] * attempts][:attempts]
        result = TaskResult(
            task=task,
            id=result_id,
            status=status,
            enqueued_at=_time(view.get("postedAt")),
            started_at=_time(history.started_at) if attempts else None,
            finished_at=_time(view.get("finishedAt")),
            last_attempted_at=_time(history.last_attempted_at) if attempts else None,
            args=item.get("args", []),
            kwargs=item.get("kwargs", {}),
            backend=self.alias,
            errors=[
                TaskError(exception_class_path=e["exceptionClassPath"], traceback=e["traceback"])
                for e in history.errors
            ],
            worker_ids=workers,
        )
        body = view.get("result")
        if status == TaskResultStatus.SUCCESSFUL and isinstance(body, dict):
            object.__setattr__(result, "_return_value", body.get("returnValue"))
        return result


def _time(ms: Any) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, tz=UTC) if isinstance(ms, int | float) else None
