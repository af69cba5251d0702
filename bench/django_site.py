"""The Django site a console or metrics benchmark runs against (settings in a temp folder,
migrated, the test environment the test client needs), and the verdict line they end with."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def set_up_site(folder: Path, *, database_url: str = "", env: dict[str, str] | None = None) -> None:
    """Configure and migrate the site in `folder` (SQLite there unless `database_url` is
    given); `env`: settings of the bench's own, over these."""
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
            "DATABASE_URL": database_url or f"sqlite:///{folder / 'bench.sqlite3'}",
            "TASKHOSTER_ITEMS_DIR": str(folder / "items"),
            "TASKHOSTER_LOGS_DIR": str(folder / "logs"),
            "TASKHOSTER_VAR_DIR": str(folder / "var"),
            "TASKHOSTER_FSYNC": "0",
            "TASKHOSTER_HTTPS": "0",
            "DEBUG": "0",
            "SECRET_KEY": "bench-only",
            "LOG_LEVEL": "WARNING",
            **(env or {}),
        }
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client's host name
    call_command("migrate", verbosity=0)


def judge(what: str, ms: float, target_ms: float, *, not_judged: str, load_at_start: float) -> None:
    """Print the verdict on `what` against the target and the machine's load, then exit 0 if
    it meets the target, 1 if not."""
    verdict = "meets" if ms < target_ms else "MISSES"
    print(f"{what} {ms:.1f} ms: {verdict} the {target_ms:.0f} ms target ({not_judged})")
    print(f"load average {os.getloadavg()[0]:.2f} at the end (started at {load_at_start:.2f})")
    sys.exit(0 if ms < target_ms else 1)
