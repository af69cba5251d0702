"""`manage.py createqueue HOST QUEUE`: create the host and queue, or update its settings."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from queues import stores
from queues.models import DEFAULTS, StoreKind
from queues.services import describe, save_queue
from queues.store import numerals

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
    "max_processing": "max_processing",
    "max_per_key": "max_per_key",
    "max_item_bytes": "max_item_bytes",
    "public_post": "public_post",
    "paused": "paused",
    "store": "store",
}


def parse_rate(text: str) -> tuple[int, int]:
    """`50/1` as (50, 1): COUNT claims per SECONDS, each in the digits 0-9 (str.isdigit() and
    int() would also take "٣/1"); CommandError for anything else."""
    count, slash, seconds = text.partition("/")
    counted, per = numerals.integer(count), numerals.integer(seconds)
    if not slash or counted is None or per is None or counted < 0 or per < 0:
        raise CommandError(
            f"--rate-limit must be COUNT/SECONDS in the digits 0-9, such as 50/1 (got {text!r})."
        )
    return counted, per


class Command(BaseCommand):
    help = "Create the host if needed and the queue, or update the queue's settings."

    def add_arguments(self, parser: CommandParser) -> None:
        new = DEFAULTS  # what a new queue gets for an option not given; an update keeps its own
        parser.add_argument("host", help="a DNS host name, e.g. task.example.com (created if new)")
        parser.add_argument(
            "queue", help="the queue's name: lower-case letters, digits, '-' and '_'"
        )
        seconds = {
            "queue": f"a task older than this fails with error 'timeout' "
            f"(new queue: {new.queue_seconds})",
            "lease": "how long a claim holds a task before another worker may take it; "
            f"progress extends it (new queue: {new.lease_seconds})",
            "retain": "how long a finished, failed or cancelled task stays readable "
            f"(new queue: {new.retain_seconds})",
            "max-retain": "under --retain-from fetched, a result nobody reads still goes "
            f"after this long (new queue: {new.max_retain_seconds})",
        }
        for name, text in seconds.items():
            parser.add_argument(
                f"--{name}-seconds", type=numerals.integer_option, metavar="S", help=text
            )
        parser.add_argument(
            "--retain-from",
            choices=["finished", "fetched"],
            help="retention starts when the task finished, or when its producer first read "
            f"the result (new queue: {new.retain_from})",
        )
        parser.add_argument(
            "--max-attempts",
            type=numerals.integer_option,
            metavar="N",
            help="attempt budget, 1 to 8: a failure reported with retry, or a lapsed lease, "
            "runs the task again after the backoff until N attempts have run; 0: no budget "
            f"(new queue: {new.max_attempts})",
        )
        parser.add_argument(
            "--max-pending",
            type=numerals.integer_option,
            metavar="N",
            help="most pending tasks; a post beyond answers 429 queue_full; 0: unbounded "
            f"(new queue: {new.max_pending})",
        )
        parser.add_argument(
            "--rate-limit",
            metavar="COUNT/SECONDS",
            help="at most COUNT claims per SECONDS across every worker, e.g. 50/1; 0/1: none "
            f"(new queue: {new.rate_count}/{new.rate_seconds})",
        )
        parser.add_argument(
            "--max-processing",
            type=numerals.integer_option,
            metavar="N",
            help="most tasks in processing at once; 0: unbounded "
            f"(new queue: {new.max_processing})",
        )
        parser.add_argument(
            "--max-per-key",
            type=numerals.integer_option,
            metavar="N",
            help="most tasks of one concurrencyKey in processing at once; 0: unbounded "
            f"(new queue: {new.max_per_key})",
        )
        parser.add_argument(
            "--max-item-bytes",
            type=numerals.integer_option,
            metavar="BYTES",
            help="cap on the item, each progress report and the result "
            f"(new queue: {new.max_item_bytes})",
        )
        parser.add_argument(
            "--store",
            choices=[kind.value for kind in StoreKind],
            help="where the tasks live: files (this machine's directories) or postgres (the "
            "PostgreSQL database, shared by several web servers); a change is refused while "
            "tasks are pending or processing (new queue: files)",
        )
        flags = {
            "archive-payloads": (
                "also keep every item, progress and result body for Task Logs",
                "stop archiving payload bodies",
            ),
            "public-post": (
                "anyone may post without a token",
                "posting needs a producer's token again",
            ),
            "paused": (
                "claims get nothing (204 with Queue-Paused: true); posting still works",
                "let claims take tasks again",
            ),
        }
        for flag, (on, off) in flags.items():
            parser.add_argument(f"--{flag}", action="store_true", default=None, help=on)
            parser.add_argument(
                f"--no-{flag}", dest=flag.replace("-", "_"), action="store_false", help=off
            )

    def handle(self, *args: object, **options: object) -> None:
        fields = {field: options[opt] for opt, field in OPTIONS.items() if options[opt] is not None}
        if options["rate_limit"] is not None:
            fields["rate_count"], fields["rate_seconds"] = parse_rate(str(options["rate_limit"]))
        try:
            queue, created = save_queue(str(options["host"]), str(options["queue"]), **fields)
        except ValidationError as exc:
            raise CommandError(describe(exc)) from None
        if queue.store == StoreKind.FILES:
            # This machine serves the file queue from now on (its schedules and alerts run
            # where its directories are): run the command on the server that holds it.
            stores.of(queue.host.name, queue.name).create_queue(queue.host.name, queue.name)
        self.stdout.write(f"{'created' if created else 'updated'} queue {queue}")
