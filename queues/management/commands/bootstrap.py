import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from queues.services import save_queue


class Command(BaseCommand):
    help = (
        "First-run set-up for `make run`: an admin user (password from "
        "TASKHOSTER_ADMIN_PASSWORD, or generated and printed once) and a demo queue."
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
        if not users.filter(username=options["admin"]).exists():
            password = os.environ.get("TASKHOSTER_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            users.create_superuser(options["admin"], password=password)
            shown = (
                "from TASKHOSTER_ADMIN_PASSWORD"
                if "TASKHOSTER_ADMIN_PASSWORD" in os.environ
                else password
            )
            self.stdout.write(
                self.style.SUCCESS(f"created admin user {options['admin']!r}, password: {shown}")
            )
            self.stdout.write("(shown once; change it in the admin)")
        queue, created = save_queue(options["demo_host"], options["demo_queue"])
        if created:
            self.stdout.write(f"created demo queue {queue}")
