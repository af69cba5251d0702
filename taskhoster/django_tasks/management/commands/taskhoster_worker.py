"""Run this project's enqueued tasks from a taskhoster queue, N at a time (the Python pool)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from taskhoster.client import ApiError
from taskhoster.django_tasks.compat import InvalidTaskError
from taskhoster.django_tasks.runner import run_task
from taskhoster.log_format import handler_for
from taskhoster.numerals import integer_option
from taskhoster.worker import Job, run_worker


class Command(BaseCommand):
    help = "Run the tasks enqueued with the taskhoster backend, from one queue."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue-name", default="default", help="the task's queue_name (default 'default')"
        )
        parser.add_argument("--backend", default="default", help="the TASKS alias")
        parser.add_argument("--concurrency", type=integer_option, default=1, help="tasks at once")
        parser.add_argument(
            "--worker",
            default=f"{socket.gethostname()}-{os.getpid()}",
            help="this worker's name (default HOSTNAME-PID)",
        )
        parser.add_argument(
            "--lease", type=integer_option, default=60, help="seconds a claim holds a task"
        )
        parser.add_argument("--max-tasks", type=integer_option, help="stop after this many tasks")
        parser.add_argument(
            "--log-format",
            choices=("human", "json"),
            default="human",
            help="the log on stderr when the project's LOGGING sets none up for taskhoster: "
            "for people (default) or one JSON object per line",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from taskhoster.django_tasks.backend import TaskhosterBackend
        from taskhoster.django_tasks.compat import task_backends

        try:
            backend = task_backends[options["backend"]]
        except Exception as exc:
            raise CommandError(f"no TASKS backend {options['backend']!r}: {exc}") from None
        if not isinstance(backend, TaskhosterBackend):
            raise CommandError(f"TASKS[{options['backend']!r}] is not the taskhoster backend")
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        stop, abandon = threading.Event(), threading.Event()

        def on_signal(signum: int, frame: Any) -> None:
            (abandon if stop.is_set() else stop).set()

        _log_to_stderr(options["log_format"], options["verbosity"])
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        queue = backend.queue_for(options["queue_name"])
        # The loop counts claims, and a retried task is claimed once per attempt: the tasks
        # are the distinct ids among them.
        tasks: set[str] = set()

        def run(job: Job) -> dict[str, Any]:
            tasks.add(job.id)
            return run_task(backend, job)

        try:
            handled = run_worker(
                backend.worker_client,
                backend.host,
                queue,
                options["worker"],
                run,
                lease=options["lease"],
                stop_event=stop,
                abandon_event=abandon,
                concurrency=options["concurrency"],
                max_tasks=options["max_tasks"],
                wait=5,
            )
        except InvalidTaskError as exc:
            raise CommandError(str(exc)) from None
        except ApiError as exc:
            if exc.status not in (401, 403):
                raise
            # The claim's refusal, said in the project's own terms: which setting to change.
            what = "is not accepted" if exc.status == 401 else "lacks the worker role on"
            raise CommandError(
                f"TASKS[{options['backend']!r}]'s WORKER_TOKEN (or TOKEN, when it has none) "
                f"{what} {backend.host}/{queue} ({exc.status} {exc.code}: {exc.detail})"
            ) from None
        attempts = f" in {handled} attempts" if handled != len(tasks) else ""
        self.stdout.write(f"{len(tasks)} task(s) from {backend.host}/{queue}{attempts}")


def _log_to_stderr(log_format: str, verbosity: int) -> None:
    """The worker's lines on stderr, unless the project's LOGGING already sends them somewhere
    (then its handlers and levels decide). --verbosity 0 keeps only the warnings."""
    taskhoster = logging.getLogger("taskhoster")
    if taskhoster.hasHandlers():
        return
    taskhoster.addHandler(handler_for(log_format))
    taskhoster.setLevel(logging.WARNING if verbosity == 0 else logging.INFO)
