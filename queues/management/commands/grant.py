"""`manage.py grant USER HOST/QUEUE ROLE`: give a user a role on a queue."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from queues.models import Role
from queues.services import grant


class Command(BaseCommand):
    help = "Give a user (created if missing) the role producer, worker or operator on a queue."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("user", help="a user name (created, without a password, if new)")
        parser.add_argument("queue", metavar="HOST/QUEUE", help="the queue, e.g. h.example/q")
        parser.add_argument("role", help=f"one of {', '.join(Role.values)}")

    def handle(self, *args: object, **options: str) -> None:
        try:
            access, created = grant(options["user"], options["queue"], options["role"])
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"{'granted' if created else 'already granted'}: {access}")
