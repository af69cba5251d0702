"""A queue's webhook, the notifications owed to it, and every try at delivering one."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from queues.models import Queue

from .addresses import RefusedAddress, check_url
from .signing import new_secret


def validate_webhook_url(value: str) -> None:
    try:
        check_url(
            value, allow_private=settings.TASKHOSTER_WEBHOOK_ALLOW_PRIVATE, must_resolve=False
        )
    except RefusedAddress as exc:
        raise ValidationError(str(exc), code="refused_url") from None


class Webhook(models.Model):
    """Where a queue's failure notifications go, signed with the queue's own secret."""

    queue = models.OneToOneField(Queue, on_delete=models.CASCADE, related_name="webhook")
    url = models.CharField(
        "URL",
        max_length=2000,
        validators=[validate_webhook_url],
        help_text="An http or https URL on a public address (a private or loopback one only "
        "when the server allows it: TASKHOSTER_WEBHOOK_ALLOW_PRIVATE).",
    )
    secret = models.CharField(
        max_length=64,
        default=new_secret,
        editable=False,
        help_text="Signs every call (Taskhoster-Signature); give it to the receiver.",
    )
    notify_failed = models.BooleanField(
        "a task fails",
        default=True,
        help_text="Call when a task ends failed: its attempts are spent, it timed out, or its "
        "worker failed it without a retry.",
    )
    pending_threshold = models.PositiveIntegerField(
        "pending tasks above",
        default=0,
        help_text="0: off. Call once when the queue's pending tasks rise above this number, "
        "and again only after they have fallen back to it or below.",
    )
    # Set while the queue is above its threshold, so a crossing calls once, not every pass.
    pending_alerted = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"webhook of {self.queue}"


class Kind(models.TextChoices):
    TASK_FAILED = "task.failed", "a task failed"
    QUEUE_PENDING = "queue.pending", "pending tasks above the threshold"


class State(models.TextChoices):
    PENDING = "pending", "to send"
    DELIVERED = "delivered", "delivered"
    GAVE_UP = "gave_up", "gave up"


class Notification(models.Model):
    """One message owed to a webhook: its body is fixed when it is made, so every try sends
    the same bytes (the signature and its timestamp are made at each try)."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    task_id = models.CharField("task", max_length=16, blank=True)
    # What caused it (a line of the event log, a threshold crossing): unique, so two sweeps
    # reading the same line make one notification.
    source = models.CharField(max_length=120, unique=True)
    body = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    tries = models.PositiveSmallIntegerField(default=0)
    next_try_at = models.DateTimeField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "next_try_at"], name="notification_due")]

    def __str__(self) -> str:
        what = f" {self.task_id}" if self.task_id else ""
        return f"{self.kind}{what} to {self.webhook.queue}"


class Delivery(models.Model):
    """One try at delivering a notification, and the receiver's answer."""

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="deliveries"
    )
    attempt = models.PositiveSmallIntegerField()
    sent_at = models.DateTimeField()
    url = models.CharField("URL", max_length=2000)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-sent_at", "-id"]

    def __str__(self) -> str:
        return f"try {self.attempt} of {self.notification}: {self.status_code or self.error}"


class LogCursor(models.Model):
    """How far the notifier has read one day-file of the event log (name, inode, offset)."""

    name = models.CharField(max_length=64, unique=True)
    inode = models.BigIntegerField()
    offset = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} @ {self.offset}"
