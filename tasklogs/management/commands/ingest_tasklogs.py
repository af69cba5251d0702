"""`manage.py ingest_tasklogs [--follow] [--source DIR]`: the store's day-files into TaskEvent."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from queues.store.inotify import APPENDS, Channel, watcher
from tasklogs.ingest import IngestReport, ingest_directory, pending_bytes
from tasklogs.progress import ProgressBar

SAFETY_WAKE_SECONDS = 30.0  # even with inotify, look again now and then (a missed event, NFS)
POLL_SECONDS = 1.0  # without inotify: a few stat calls a second cost nothing
BAR_FROM_BYTES = 4 << 20  # smaller runs finish before a bar would be worth drawing


class Command(BaseCommand):
    help = "Read the store's task-event day-files into the Task Logs table (incremental)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--follow", action="store_true", help="Keep going; wake on appends.")
        parser.add_argument("--source", type=Path, help="Day-file directory (default: logs/tasks).")

    def handle(self, *args: Any, follow: bool, source: Path | None, **options: Any) -> None:
        if source is None:
            source = Path(settings.TASKHOSTER_LOGS_DIR) / "tasks"
            # The store makes this directory on its first event; a fresh install that starts
            # ingestion before any task was posted must not fail for that.
            source.mkdir(parents=True, exist_ok=True)
        if not source.is_dir():
            raise CommandError(f"{source} is not a directory.")
        # Watch before the first run, so a line appended while it runs still wakes the next.
        # The store's watcher: this process's one waiting instance, whoever else uses it.
        channel = watcher().channel([str(source)], APPENDS) if follow else None
        generation = channel.generation if channel else 0
        self._run_once(source)
        if channel:
            self._follow(source, channel, generation)

    def _run_once(self, source: Path) -> IngestReport:
        started = time.monotonic()
        bar = self._bar(source)
        report = ingest_directory(source, progress=bar)
        if bar:
            bar.done()
        for bad in report.bad_lines:
            self.stderr.write(f"bad line {bad}")
        if report.lines or report.bad:
            seconds = time.monotonic() - started
            self.stdout.write(
                f"{report.lines} lines from {report.files} day-files in "
                f"{seconds:.1f} s, {report.bad} bad"
            )
        return report

    def _bar(self, source: Path) -> ProgressBar | None:
        if not sys.stderr.isatty():
            return None
        total = pending_bytes(source)
        return ProgressBar(total, sys.stderr) if total >= BAR_FROM_BYTES else None

    def _follow(self, source: Path, channel: Channel, generation: int) -> None:
        try:
            while True:
                channel.wait(generation, SAFETY_WAKE_SECONDS, poll=POLL_SECONDS)
                generation = channel.generation  # read before the run, so no append is missed
                close_old_connections()  # a follower runs for days; drop a connection gone bad
                self._run_once(source)
        except KeyboardInterrupt:
            pass
