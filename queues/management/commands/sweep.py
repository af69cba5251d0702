"""`manage.py sweep [--loop] [--interval S]`: timeouts, retention and log pruning."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import InterfaceError, OperationalError, connections

from queues import stores
from queues.metrics import server, tracing
from queues.processes.sweep_services import run_sweep_services, run_sweep_services_every
from queues.processes.sweeping import (
    SUMMARY_SECONDS,
    SweepTally,
    changes,
    configured_queues,
    plural,
)
from queues.services import queue_settings_for
from queues.store import StorageUnavailable, SweepReport, numerals
from queues.stores.router import StoreRouter

DATABASE_DOWN = "sweep: the database is unreachable; sweeping again once it answers"


class Command(BaseCommand):
    help = (
        "Sweep every configured queue once and print what it did, or keep sweeping with "
        "--loop, printing a line only when a pass changed something and a summary every "
        f"{SUMMARY_SECONDS / 60:g} minutes. Ctrl-C stops the loop."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--loop", action="store_true", help="keep sweeping until Ctrl-C (or SIGTERM)"
        )
        parser.add_argument(
            "--interval",
            type=numerals.number_option,
            default=5.0,
            help="seconds between the passes of --loop (default: 5)",
        )

    def handle(self, *args: Any, loop: bool, interval: float, **options: Any) -> None:
        if not interval > 0:
            raise CommandError("--interval must be a number of seconds above 0.")
        try:
            self.loop(interval) if loop else self.once()
        except KeyboardInterrupt:  # Ctrl-C: the store is safe to stop at any instant
            self.say("sweep stopped")

    def once(self) -> None:
        store = stores.router()
        report = store.sweep_all(queue_settings_for)
        run_sweep_services(store)
        if report.skipped:
            self.say("skipped: another sweep is running")
        else:
            counts = {**report.counts(), "queues": configured_queues()}
            self.say(" ".join(f"{name}={n}" for name, n in counts.items()))
        for error in report.errors:
            self.stderr.write(error)

    def loop(self, interval: float) -> None:
        counting = settings.TASKHOSTER_SERVER_METRICS
        tracing.configure()
        if counting:  # its passes and flushes, for /metrics (docs/metrics.md)
            server.start("sweep", settings.VAR_DIR)
            server.write_every(settings.TASKHOSTER_METRICS_WRITE_SECONDS)
            server.watch_flushes()
        store = stores.router()
        tally = SweepTally(started=time.time())
        try:
            covered = plural(configured_queues(), "configured queue")
        except (OperationalError, InterfaceError):
            connections.close_all()
            covered = "the configured queues (the database is unreachable yet)"
        self.say(
            f"sweeping {covered} every {interval:g} s: "
            f"a line when a pass changes something, a summary every "
            f"{tally.summary_seconds / 60:g} min (Ctrl-C stops)"
        )
        stop = threading.Event()
        # the schedules and webhooks keep their own pace: a slow receiver never holds this one
        run_sweep_services_every(store, interval, stop)
        try:
            while True:
                took, started_ns = server.timed(), time.time_ns()
                report, queues = self.one_pass(store)
                if counting:
                    server.observe_sweep(took(), skipped=report.skipped,
                                         errors=bool(report.errors))  # fmt: skip
                tracing.sweep_pass(changes(report), started_ns)
                out, errors = tally.lines(report, queues, time.time())
                for line in out:
                    self.say(line)
                for error in errors:
                    self.stderr.write(error)
                time.sleep(interval)
        finally:
            stop.set()

    def one_pass(self, store: StoreRouter) -> tuple[SweepReport, int]:
        """One pass of the loop and the count of configured queues. A database that went away
        (restarted, failed over) is an error of this pass, said once, not the loop's end: a
        loop that died with it would stop timing out tasks until someone restarted it."""
        try:
            return store.sweep_all(queue_settings_for), configured_queues()
        except (OperationalError, InterfaceError, StorageUnavailable):
            connections.close_all()  # Django's broken connection: the next pass opens anew
            # one sentence whatever the driver said (refused, starting up, cut off), so the
            # tally says it once for the whole outage
            return SweepReport(errors=[DATABASE_DOWN]), 0

    def say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()  # a supervisor's log (a pipe) sees each line when it happens
