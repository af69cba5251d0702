"""`manage.py serve`: gunicorn, the sweep loop and log ingestion, kept running by
queues/processes/supervisor.py (whose docstring holds the restart and stop policy)."""

import runpy
import sys
from pathlib import Path

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandError, CommandParser

from queues.processes.supervisor import Program, Supervisor
from queues.store import numerals

# How much longer than gunicorn's graceful_timeout a stop waits before SIGKILL: gunicorn's
# master kills its own workers at graceful_timeout, and needs a moment to say so and exit.
GRACE_MARGIN_SECONDS = 5.0


class Command(BaseCommand):
    help = (
        "Run the whole server: gunicorn, the sweep loop and log ingestion. A part that dies "
        "is started again (after 1 s, doubling to 60 s); one that cannot start stops serve. "
        "Ctrl-C (or SIGTERM) stops everything it started; a second Ctrl-C at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--bind",
            default="127.0.0.1:8000",
            metavar="HOST:PORT",
            help="where gunicorn listens (default: 127.0.0.1:8000)",
        )
        parser.add_argument(
            "--sweep-interval",
            type=numerals.number_option,
            default=5.0,
            metavar="S",
            help="seconds between the sweep loop's passes (default: 5)",
        )
        parser.add_argument(
            "--start-seconds",
            type=numerals.number_option,
            default=10.0,
            metavar="S",
            help="a part that ends this soon after serve started it cannot start, and serve "
            "stops (default: 10)",
        )

    def handle(self, *args: object, **options: object) -> None:
        start_seconds = float(options["start_seconds"])  # type: ignore[arg-type]
        if not start_seconds >= 0:
            raise CommandError("--start-seconds must be a number of seconds, 0 or more.")
        graceful = float(runpy.run_path(str(self.gunicorn_conf()))["graceful_timeout"])
        supervisor = Supervisor(
            self.programs(options),
            grace=graceful + GRACE_MARGIN_SECONDS,
            start_seconds=start_seconds,
        )
        if supervisor.run() != 0:
            sys.exit(1)

    def gunicorn_conf(self) -> Path:
        return Path(settings.BASE_DIR) / "gunicorn.conf.py"

    def programs(self, options: dict[str, object]) -> list[Program]:
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        python = sys.executable
        gunicorn = [python, "-m", "gunicorn", "-c", str(self.gunicorn_conf())]
        web = [*gunicorn, "--bind", str(options["bind"]), "taskhoster_site.wsgi:application"]
        programs = [
            Program("web", web),
            Program(
                "sweep",
                [python, manage, "sweep", "--loop", "--interval", str(options["sweep_interval"])],
            ),
        ]
        if "ingest_tasklogs" in get_commands():
            programs.append(Program("ingest", [python, manage, "ingest_tasklogs", "--follow"]))
        return programs
