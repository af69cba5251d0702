from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from queues.services import describe, save_queue

# option -> Queue field, for the settings the command line can change
OPTIONS = {
    "queue_seconds": "queue_seconds",
    "lease_seconds": "lease_seconds",
    "retain_seconds": "retain_seconds",
    "retain_from": "retain_from",
    "max_retain_seconds": "max_retain_seconds",
    "archive_payloads": "archive_payloads",
    "max_attempts": "max_attempts",
    "max_pending": "max_pending",
    "max_item_bytes": "max_item_bytes",
    "public_post": "public_post",
    "paused": "paused",
}


class Command(BaseCommand):
    help = "Create the host if needed and the queue, or update the queue's settings."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("host")
        parser.add_argument("queue")
        for name in ("queue", "lease", "retain", "max-retain"):
            parser.add_argument(f"--{name}-seconds", type=int)
        parser.add_argument("--retain-from", choices=["finished", "fetched"])
        parser.add_argument("--max-attempts", type=int)
        parser.add_argument("--max-pending", type=int)
        parser.add_argument("--max-item-bytes", type=int)
        for flag in ("archive-payloads", "public-post", "paused"):
            parser.add_argument(f"--{flag}", action="store_true", default=None)
            parser.add_argument(f"--no-{flag}", dest=flag.replace("-", "_"), action="store_false")

    def handle(self, *args: object, **options: object) -> None:
        fields = {field: options[opt] for opt, field in OPTIONS.items() if options[opt] is not None}
        try:
            queue, created = save_queue(str(options["host"]), str(options["queue"]), **fields)
        except ValidationError as exc:
            raise CommandError(describe(exc)) from None
        self.stdout.write(f"{'created' if created else 'updated'} queue {queue}")
