"""Hosts, queues, who may use them, and the API tokens that say who is calling.

The queue's tasks themselves live in the file-system store (`queues.store`); these models
hold only configuration, which the store receives as a plain `QueueSettings` value.
"""

from collections.abc import Callable, Collection

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from queues.store.settings import QueueSettings
from queues.validators import (
    validate_host_name,
    validate_item_schema,
    validate_name,
    validate_queue_name,
)

# A queue's settings have one default each, the store's (QueueSettings); the fields below
# take theirs from it, so a queue made in the admin, by createqueue or by the store alone
# starts alike.
DEFAULTS = QueueSettings()


class Host(models.Model):
    """A DNS host name that owns queues: the unit of placement on an item server."""

    name = models.CharField(
        max_length=253,
        unique=True,
        validators=[validate_host_name],
        help_text="A DNS host name in lower case, e.g. task.example.com.",
    )
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RetainFrom(models.TextChoices):
    FINISHED = "finished", "when the task finished"
    FETCHED = "fetched", "when its producer first read the result"


class StoreKind(models.TextChoices):
    FILES = "files", "files: this machine's directories"
    POSTGRES = "postgres", "postgres: the PostgreSQL database (several web servers)"


# The rules on a queue's `store` (queues/stores/choice.py) ask the stores, which read this
# module: the app's ready() hands them in here (queues/apps.py), so the models import nothing
# of the stores.
STORE_RULES: list[Callable[["Queue"], None]] = []


# The bound of every integer setting of a queue, on SQLite and PostgreSQL alike: Django's own
# bound is the column's, 2^63-1 on SQLite and 2^31-1 (an integer) on PostgreSQL, so the same
# admin form saved on one database would be refused on the other.
MOST_INTEGER = 2**31 - 1
# maxProcessing and maxPerKey: tasks in processing at once (as rateCount, claims per window).
MOST_AT_ONCE = 1_000_000


class Queue(models.Model):
    """One queue of a host and every setting the store applies to it (store.md's table)."""

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="queues")
    name = models.CharField(
        max_length=64,
        validators=[validate_queue_name],
        help_text="Lower-case letters, digits, '-' and '_', starting with a letter or digit.",
    )
    queue_seconds = models.PositiveIntegerField(
        "queue timeout (s)",
        default=DEFAULTS.queue_seconds,
        validators=[MinValueValidator(1), MaxValueValidator(MOST_INTEGER)],
        help_text="A task older than this fails with error 'timeout', waiting or running.",
    )
    lease_seconds = models.PositiveIntegerField(
        "lease (s)",
        default=DEFAULTS.lease_seconds,
        validators=[MinValueValidator(1), MaxValueValidator(MOST_INTEGER)],
        help_text="How long a claim holds a task before the sweep hands it to another worker. "
        "Workers extend it by reporting progress. At most the queue timeout.",
    )
    retain_seconds = models.PositiveIntegerField(
        "retention (s)",
        default=DEFAULTS.retain_seconds,
        validators=[MaxValueValidator(MOST_INTEGER)],
        help_text="How long a finished, failed or cancelled task stays readable.",
    )
    retain_from = models.CharField(
        "retention starts",
        max_length=8,
        choices=RetainFrom.choices,
        default=DEFAULTS.retain_from,
    )
    max_retain_seconds = models.PositiveIntegerField(
        "longest retention (s)",
        default=DEFAULTS.max_retain_seconds,
        validators=[MinValueValidator(1), MaxValueValidator(MOST_INTEGER)],
        help_text="Under 'fetched', a result nobody reads is still deleted after this long.",
    )
    archive_payloads = models.BooleanField(
        default=DEFAULTS.archive_payloads,
        help_text="Also keep every item, progress and result body in the payload archive, "
        "so Task Logs can show them after the task is gone.",
    )
    max_attempts = models.PositiveSmallIntegerField(
        "attempt budget",
        default=DEFAULTS.max_attempts,
        validators=[MaxValueValidator(8)],
        help_text="How many times a task may run: a failure reported with retry (the Python "
        "worker loop reports a handler's exception so) or a lapsed lease runs it again after "
        "the backoff until this many attempts have run, then it fails with error 'attempts'. "
        "1 to 8; 0: no budget (a lapsed lease re-queues until the queue timeout).",
    )
    backoff_seconds = models.PositiveIntegerField(
        "first retry delay (s)",
        default=DEFAULTS.backoff_seconds,
        validators=[MaxValueValidator(MOST_INTEGER)],
        help_text="Delay before a retried attempt; multiplied by the factor on each attempt.",
    )
    backoff_factor = models.PositiveSmallIntegerField(
        default=DEFAULTS.backoff_factor,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
    )
    backoff_cap_seconds = models.PositiveIntegerField(
        "longest retry delay (s)",
        default=DEFAULTS.backoff_cap_seconds,
        validators=[MaxValueValidator(MOST_INTEGER)],
    )
    max_item_bytes = models.PositiveIntegerField(
        "largest payload (bytes)",
        default=DEFAULTS.max_item_bytes,
        validators=[MinValueValidator(2), MaxValueValidator(16 * 1024 * 1024)],
        help_text="Cap for the item, each progress report and the result.",
    )
    max_pending = models.PositiveIntegerField(
        "most pending tasks",
        default=DEFAULTS.max_pending,
        validators=[MaxValueValidator(MOST_INTEGER)],
        help_text="0: unbounded. Posting beyond it answers 429 queue_full.",
    )
    rate_count = models.PositiveIntegerField(
        "rate limit: claims",
        default=DEFAULTS.rate_count,
        validators=[MaxValueValidator(MOST_AT_ONCE)],
        help_text="At most this many claims per the seconds below, across every worker and "
        "server process (0: no rate limit). A claim over it waits for a token within its wait, "
        "or answers 204 with Retry-After and Queue-Limited: rate.",
    )
    rate_seconds = models.PositiveIntegerField(
        "rate limit: per seconds",
        default=DEFAULTS.rate_seconds,
        validators=[MinValueValidator(1), MaxValueValidator(86400)],
    )
    max_processing = models.PositiveIntegerField(
        "most tasks processing",
        default=DEFAULTS.max_processing,
        validators=[MaxValueValidator(MOST_AT_ONCE)],
        help_text="0: unbounded. Tasks in processing at once, across every worker.",
    )
    max_per_key = models.PositiveIntegerField(
        "most processing per key",
        default=DEFAULTS.max_per_key,
        validators=[MaxValueValidator(MOST_AT_ONCE)],
        help_text="0: unbounded. Tasks posted with one concurrencyKey in processing at once; "
        "claims take the queue's other tasks past the held ones.",
    )
    item_schema = models.JSONField(
        null=True,
        blank=True,
        validators=[validate_item_schema],
        help_text="Optional JSON Schema every posted item must satisfy.",
    )
    public_post = models.BooleanField(
        default=DEFAULTS.public_post,
        help_text="Anyone may post without a token; such a task's id is its only key.",
    )
    paused = models.BooleanField(
        default=DEFAULTS.paused,
        help_text="Claims get nothing while paused (a claim answers 204 with Queue-Paused: "
        "true); posting still works.",
    )
    store = models.CharField(
        max_length=8,
        choices=StoreKind.choices,
        default=StoreKind.FILES,
        help_text="Where the queue's tasks live. Files: one machine, fastest. PostgreSQL: "
        "several web servers share the queue. A change applies to new tasks and is refused "
        "while tasks are pending or processing; ended tasks stay in the old store until "
        "retention removes them.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["host__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["host", "name"], name="queue_unique_per_host"),
        ]

    def __str__(self) -> str:
        return f"{self.host.name}/{self.name}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.lease_seconds and self.queue_seconds and self.lease_seconds > self.queue_seconds:
            errors["lease_seconds"] = (
                f"A lease of {self.lease_seconds} s outlives the queue timeout of "
                f"{self.queue_seconds} s: the task would time out before its lease lapsed."
            )
        if self.backoff_cap_seconds < self.backoff_seconds:
            errors["backoff_cap_seconds"] = "The longest retry delay is shorter than the first."
        if self.retain_from == RetainFrom.FETCHED and self.max_retain_seconds < self.retain_seconds:
            errors["max_retain_seconds"] = (
                "The longest retention is shorter than the retention itself."
            )
        if errors:
            raise ValidationError(errors)
        self.clean_store()

    def clean_store(self) -> None:
        """Refuse a store that is not configured, or a change of store while tasks are in
        flight (they would be stranded in the old store, out of reach of claims)."""
        for rule in STORE_RULES:
            rule(self)

    def to_settings(self) -> QueueSettings:
        """The plain value the store works with."""
        return QueueSettings(
            queue_seconds=self.queue_seconds,
            retain_seconds=self.retain_seconds,
            retain_from=self.retain_from,
            max_retain_seconds=self.max_retain_seconds,
            archive_payloads=self.archive_payloads,
            lease_seconds=self.lease_seconds,
            max_attempts=self.max_attempts,
            backoff_seconds=self.backoff_seconds,
            backoff_factor=self.backoff_factor,
            backoff_cap_seconds=self.backoff_cap_seconds,
            max_item_bytes=self.max_item_bytes,
            max_pending=self.max_pending,
            rate_count=self.rate_count,
            rate_seconds=self.rate_seconds,
            max_processing=self.max_processing,
            max_per_key=self.max_per_key,
            item_schema=self.item_schema,
            public_post=self.public_post,
            paused=self.paused,
        )


class Role(models.TextChoices):
    PRODUCER = "producer", "producer: post, read and cancel its own tasks"
    WORKER = "worker", "worker: claim, report progress, results and failures"
    OPERATOR = "operator", "operator: see and act on every task, browse the logs"


class QueueAccess(models.Model):
    """A role on one queue, given to a user or to a group (exactly one of the two)."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="access")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE
    )
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE)
    role = models.CharField(max_length=8, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "queue access"
        verbose_name_plural = "queue access"
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(user__isnull=False, group__isnull=True)
                    | models.Q(user__isnull=True, group__isnull=False)
                ),
                name="access_for_user_xor_group",
            ),
            models.UniqueConstraint(
                fields=["queue", "user", "role"], name="access_unique_user_role"
            ),
            models.UniqueConstraint(
                fields=["queue", "group", "role"], name="access_unique_group_role"
            ),
        ]

    def __str__(self) -> str:
        who = self.user or f"group {self.group}"
        return f"{who} is {self.role} of {self.queue}"

    def clean(self) -> None:
        if self._user_xor_group_broken():
            raise ValidationError("Give the role to a user or to a group, not both or neither.")

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        # clean() has said it in words; the check constraint would add its raw name beside.
        if self._user_xor_group_broken():
            exclude = {*(exclude or ()), "user", "group"}
        super().validate_constraints(exclude)

    def _user_xor_group_broken(self) -> bool:
        return (self.user_id is None) == (self.group_id is None)


class ApiToken(models.Model):
    """A bearer token of a user. Only a SHA-256 hash is stored; the token is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(
        max_length=100,
        validators=[validate_name],
        help_text="What the token is for, e.g. 'box-1'.",
    )
    prefix = models.CharField(max_length=12, unique=True, editable=False)
    token_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Leave empty for a token that does not expire."
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user}"

    def is_usable(self, now: timezone.datetime | None = None) -> bool:
        now = now or timezone.now()
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > now


class WorkerSighting(models.Model):
    """When a worker last asked a queue for work. A claim that finds nothing writes no event,
    so without this a worker idle on an empty queue would look gone quiet on the workers page.
    Written at most once a minute per worker and web process (queues/api/sightings.py)."""

    host = models.CharField(max_length=253)
    queue = models.CharField(max_length=64)
    worker = models.CharField(max_length=255)
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["host", "queue", "worker"], name="one_sighting_a_worker"
            )
        ]

    def __str__(self) -> str:
        return f"{self.worker} on {self.host}/{self.queue} at {self.seen_at}"
