"""`manage.py bootstrap`: the first run's admin user and demo queue, for `make run`."""

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from queues.services import save_queue

FIRST_LOGIN_FILE = "admin-password"


def write_private(path: Path, text: str) -> Path:
    """Write `text` to a file only its owner can read: created 0600, never readable by others
    for an instant (and made 0600 if it was there before)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(fd, 0o600)
        file.write(text + "\n")
    return path


class Command(BaseCommand):
    help = (
        "First-run set-up for `make run`: an admin user (password from "
        "TASKHOSTER_ADMIN_PASSWORD, or generated and written to var/admin-password, 0600) and a "
        "demo queue."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--admin", default="admin", help="the admin's user name (default: admin)"
        )
        parser.add_argument(
            "--demo-host", default="demo.localhost", help="the demo queue's host name"
        )
        parser.add_argument("--demo-queue", default="demo", help="the demo queue's name")

    def handle(self, *args: object, **options: str) -> None:
        users = get_user_model().objects
        if users.filter(username=options["admin"]).exists():
            self.stdout.write(self._where_the_password_is(options["admin"]))
        else:
            password = os.environ.get("TASKHOSTER_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            users.create_superuser(options["admin"], password=password)
            if "TASKHOSTER_ADMIN_PASSWORD" in os.environ:
                where = "from TASKHOSTER_ADMIN_PASSWORD"
            else:
                where = f"in {write_private(settings.VAR_DIR / FIRST_LOGIN_FILE, password)}"
            self.stdout.write(
                self.style.SUCCESS(f"created admin user {options['admin']!r}, password {where}")
            )
            if "TASKHOSTER_ADMIN_PASSWORD" not in os.environ:
                self.stdout.write("(readable by you only; delete it once you changed the password)")
        queue, created = save_queue(options["demo_host"], options["demo_queue"])
        if created:
            self.stdout.write(f"created demo queue {queue}")

    @staticmethod
    def _where_the_password_is(admin: str) -> str:
        """A later run's line: the first run's words scrolled away long ago."""
        kept = settings.VAR_DIR / FIRST_LOGIN_FILE
        if kept.exists():
            return f"admin user {admin!r}: its first password is in {kept}"
        return (
            f"admin user {admin!r}: its password is not kept here "
            f"({kept} is gone; `manage.py changepassword {admin}` sets a new one)"
        )
