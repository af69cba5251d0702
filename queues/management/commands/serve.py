import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Run the whole server: gunicorn, the sweep loop and log ingestion. "
        "Ctrl-C (or SIGTERM) stops everything it started."
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
            type=float,
            default=5.0,
            metavar="S",
            help="seconds between the sweep loop's passes (default: 5)",
        )

    def handle(self, *args: object, **options: object) -> None:
        # Our own interpreter and fixed arguments: nothing here comes from a request.
        children = [subprocess.Popen(argv) for argv in self.programs(options)]  # noqa: S603
        stopping = False

        def stop(signum: int, frame: FrameType | None) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        # Whichever child ends first (or a signal) ends them all: a half-running server
        # that sweeps but does not serve, or serves but never sweeps, is worse than none.
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.2)
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
        failed = [child.args for child in children if child.returncode not in (0, -15)]
        if failed and not stopping:
            sys.exit(1)

    def programs(self, options: dict[str, object]) -> list[list[str]]:
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        python = sys.executable
        gunicorn_conf = str(Path(settings.BASE_DIR) / "gunicorn.conf.py")
        programs = [
            [
                python,
                "-m",
                "gunicorn",
                "-c",
                gunicorn_conf,
                "--bind",
                str(options["bind"]),
                "taskhoster_site.wsgi:application",
            ],
            [python, manage, "sweep", "--loop", "--interval", str(options["sweep_interval"])],
        ]
        if "ingest_tasklogs" in get_commands():
            programs.append([python, manage, "ingest_tasklogs", "--follow"])
        return programs
