"""`manage.py sweep [--loop] [--interval S]`: timeouts, retention and log pruning."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from queues.services import get_store, queue_settings_for
from queues.store import sweep_all
from queues.sweep_services import run_sweep_services


class Command(BaseCommand):
    help = "Sweep every configured queue once (or every --interval seconds with --loop)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--loop", action="store_true", help="keep sweeping")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between sweeps")

    def handle(self, *args: Any, loop: bool, interval: float, **options: Any) -> None:
        if not interval > 0:
            raise CommandError("--interval must be a number of seconds above 0.")
        store = get_store()
        while True:
            report = sweep_all(store, queue_settings_for)
            counts = " ".join(f"{k}={v}" for k, v in report.counts().items())
            self.stdout.write("skipped: another sweep is running" if report.skipped else counts)
            for error in report.errors:
                self.stderr.write(error)
            run_sweep_services(store)
            if not loop:
                return
            time.sleep(interval)
