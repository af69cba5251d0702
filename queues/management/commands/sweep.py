"""`manage.py sweep [--loop] [--interval S]`: timeouts, retention and log pruning."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from queues.services import queue_settings_for
from queues.store import QueueStore, StoreConfig, sweep_all


class Command(BaseCommand):
    help = "Sweep every configured queue once (or every --interval seconds with --loop)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--loop", action="store_true", help="keep sweeping")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between sweeps")

    def handle(self, *args: Any, **options: Any) -> None:
        store = QueueStore(StoreConfig(
            items_dir=Path(settings.TASKHOSTER_ITEMS_DIR),
            logs_dir=Path(settings.TASKHOSTER_LOGS_DIR),
            fsync=getattr(settings, "TASKHOSTER_FSYNC", True),
            log_retain_days=getattr(settings, "TASKHOSTER_LOG_RETAIN_DAYS", 21),
        ))  # fmt: skip
        while True:
            report = sweep_all(store, queue_settings_for)
            counts = " ".join(f"{k}={v}" for k, v in report.counts().items())
            self.stdout.write("skipped: another sweep is running" if report.skipped else counts)
            for error in report.errors:
                self.stderr.write(error)
            if not options["loop"]:
                return
            time.sleep(options["interval"])
