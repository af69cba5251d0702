"""`manage.py ingest_tasklogs [--follow] [--source DIR]`: the store's day-files into TaskEvent,
and the PostgreSQL store's event rows when that store is in another database (store_events.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from queues import stores
from queues.store import StoreError
from queues.store.inotify import APPENDS, Channel, watcher
from queues.stores.pg_location import pg_location
from tasklogs.ingest import IngestReport, ingest_directory, pending_bytes
from tasklogs.progress import ProgressBar
from tasklogs.store_events import copy_store_events, store_in_use
from tasklogs.summaries import SUMMARY_SECONDS, FollowSummary, run_line

SAFETY_WAKE_SECONDS = 30.0  # even with inotify, look again now and then (a missed event, NFS)
POLL_SECONDS = 1.0  # without inotify: a few stat calls a second cost nothing
# the PostgreSQL store's rows wake no inotify watch: a follower copying them looks this often
STORE_POLL_SECONDS = 1.0
BAR_FROM_BYTES = 4 << 20  # smaller runs finish before a bar would be worth drawing
DISK_RETRY_SECONDS = 5.0  # a follower waiting for a read-only or failing logs disk looks again


class Command(BaseCommand):
    help = (
        "Read the store's task-event day-files into the Task Logs table (incremental: each run "
        "reads only what was appended since the last), and the PostgreSQL store's event rows "
        "when that store is in another database than the console's (TASKHOSTER_PG_STORE_URL). "
        "Prints a line when it ingested something; "
        "with --follow, a summary at most every "
        f"{SUMMARY_SECONDS / 60:.0f} minutes, and nothing while idle. Ctrl-C stops it (exit 0)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--follow",
            action="store_true",
            help="Keep running after the first run, woken by each append and each new day-file.",
        )
        parser.add_argument(
            "--source",
            type=Path,
            metavar="DIR",
            help="The day-file directory to read (default: TASKHOSTER_LOGS_DIR/tasks).",
        )

    def handle(self, *args: Any, follow: bool, source: Path | None, **options: Any) -> None:
        self.quiet = options["verbosity"] == 0
        self.follow = follow
        self.disk_error: str | None = None
        if source is None:
            source = Path(settings.TASKHOSTER_LOGS_DIR) / "tasks"
            # The store makes this directory on its first event; a fresh install that starts
            # ingestion before any task was posted must not fail for that.
            try:
                self._make(source, follow)
            except KeyboardInterrupt:
                return
        if not source.is_dir():
            raise CommandError(f"{source} is not a directory.")
        location = pg_location()
        # Only a store in another database has rows to copy: on the console's own database
        # the store writes Task Logs' rows itself.
        self.copies_store = location is not None and not location.shares_console_db
        self.store_error: str | None = None
        summary = FollowSummary()
        try:
            # Watch before the first run, so a line appended while it runs still wakes the next.
            # The store's watcher: this process's one waiting instance, whoever else uses it.
            channel = watcher().channel([str(source)], APPENDS) if follow else None
            generation = channel.generation if channel else 0
            if self._say(run_line(*self._timed_run(source, bar=True))):
                summary.said()
            if channel:
                self._follow(source, channel, generation, summary)
            elif self.store_error is not None:
                raise CommandError(self.store_error)
        except KeyboardInterrupt:
            # Ctrl-C is how a follower is meant to stop: no traceback, exit 0. Each chunk was
            # stored with its cursor in one transaction, so an interrupted one is simply read
            # again by the next run.
            self._say(summary.take())

    def _make(self, source: Path, follow: bool) -> None:
        """Make `source`; a follower waits for a logs disk that refuses it (read-only, full)
        and says so once: run by serve beside the API, it must outlive the outage."""
        while True:
            try:
                source.mkdir(parents=True, exist_ok=True)
                break
            except OSError as exc:
                error = f"{source} could not be made: {exc.strerror}."
                if not follow:
                    raise CommandError(error) from exc
                self._disk_refused(f"{error} Trying again every {DISK_RETRY_SECONDS:g} s.")
                time.sleep(DISK_RETRY_SECONDS)
        self._disk_back()

    def _disk_refused(self, error: str) -> None:
        if error != self.disk_error:
            self.stderr.write(error)
        self.disk_error = error

    def _disk_back(self) -> None:
        if self.disk_error is not None:
            self._say("The logs disk answers again; ingesting.")
        self.disk_error = None

    def _timed_run(self, source: Path, *, bar: bool = False) -> tuple[IngestReport, float]:
        started = time.monotonic()
        progress = self._bar(source) if bar else None
        try:
            report = ingest_directory(source, progress=progress)
        except OSError as exc:
            # the day-files' disk failing to read: the stored lines and cursors are whole
            # (each chunk is one transaction), so the next run reads on from there
            error = f"The day-files in {source} could not be read: {exc.strerror}."
            if not self.follow:
                raise CommandError(error) from exc
            self._disk_refused(error)
            return IngestReport(), time.monotonic() - started
        self._disk_back()
        if progress:
            progress.done()
        for bad in report.bad_lines:
            self.stderr.write(f"bad line {bad}")
        if self.copies_store:
            report.add(self._copy_store())
        return report, time.monotonic() - started

    def _copy_store(self) -> IngestReport:
        """The PostgreSQL store's new rows; its database not answering is said once (and
        again when it changes), and the day-files are ingested all the same."""
        if not store_in_use():
            return IngestReport()
        try:
            report = copy_store_events(stores.router().postgres)
        except StoreError as exc:
            error = f"The PostgreSQL store's events were not copied: {exc.detail}"
            if error != self.store_error:
                self.stderr.write(error)
            self.store_error = error
            return IngestReport()
        self.store_error = None
        return report

    def _say(self, text: str | None) -> bool:
        if text is not None and not self.quiet:
            self.stdout.write(text)
            self.stdout.flush()
        return text is not None

    def _bar(self, source: Path) -> ProgressBar | None:
        if not sys.stderr.isatty():
            return None
        total = pending_bytes(source)
        return ProgressBar(total, sys.stderr) if total >= BAR_FROM_BYTES else None

    def _follow(
        self, source: Path, channel: Channel, generation: int, summary: FollowSummary
    ) -> None:
        while True:
            # Wake for an append, for a summary coming due, or to look again now and then.
            wake = min(SAFETY_WAKE_SECONDS, summary.due_in())
            if self.copies_store:
                wake = min(wake, STORE_POLL_SECONDS)
            channel.wait(generation, wake, poll=POLL_SECONDS)
            generation = channel.generation  # read before the run, so no append is missed
            close_old_connections()  # a follower runs for days; drop a connection gone bad
            report, _ = self._timed_run(source)
            summary.add(lines=report.lines + report.store_rows, bad=report.bad)
            self._say(summary.take_if_due())
