"""Run this project's enqueued tasks from a taskhoster queue, N at a time (the Python pool)."""

from __future__ import annotations

import os
import signal
import socket
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from taskhoster.django_tasks.compat import InvalidTaskError
from taskhoster.django_tasks.runner import run_task
from taskhoster.worker import run_worker


class Command(BaseCommand):
    help = "Run the tasks enqueued with the taskhoster backend, from one queue."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue-name", default="default", help="the task's queue_name (default 'default')"
        )
        parser.add_argument("--backend", default="default", help="the TASKS alias")
        parser.add_argument("--concurrency", type=int, default=1, help="tasks at once")
        parser.add_argument(
            "--worker",
            default=f"{socket.gethostname()}-{os.getpid()}",
            help="this worker's name (default HOSTNAME-PID)",
        )
        parser.add_argument("--lease", type=int, default=60, help="seconds a claim holds a task")
        parser.add_argument("--max-tasks", type=int, help="stop after this many tasks")

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

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        queue = backend.queue_for(options["queue_name"])
        try:
            handled = run_worker(
                backend.worker_client,
                backend.host,
                queue,
                options["worker"],
                lambda job: run_task(backend, job),
                lease=options["lease"],
                stop_event=stop,
                abandon_event=abandon,
                concurrency=options["concurrency"],
                max_tasks=options["max_tasks"],
                wait=5,
            )
        except InvalidTaskError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{handled} task(s) from {backend.host}/{queue}")
