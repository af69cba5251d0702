"""`manage.py createtoken USER`: print a new API token, once."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from queues.auth.tokens import issue_token
from queues.store import numerals


class Command(BaseCommand):
    help = "Print a new API token for a user. It is shown this once and stored only hashed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("user", help="the user the token acts as (an existing user name)")
        parser.add_argument(
            "--name", default="cli", help="what the token is for, e.g. box-1 (default: cli)"
        )
        parser.add_argument(
            "--expires-days",
            type=numerals.integer_option,
            metavar="N",
            help="days until it expires (default: never)",
        )

    def handle(self, *args: object, **options: object) -> None:
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"There is no user {options['user']!r}.")
        days = options["expires_days"]
        if days is not None and not (isinstance(days, int) and days >= 1):
            raise CommandError("--expires-days must be an integer of at least 1.")
        expires = timezone.now() + timedelta(days=days) if days else None
        try:
            _, token = issue_token(user, str(options["name"]), expires_at=expires)
        except ValidationError as exc:
            raise CommandError(f"--name: {' '.join(exc.messages)}") from None
        self.stdout.write(token)
