"""What the console's queue page shows of a queue's webhook: its latest notifications, each
with every delivery try and its answer. Nothing here renders."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Prefetch

from queues.models import Queue

from .models import Delivery, Notification, Webhook

SHOWN = 20


@dataclass(frozen=True)
class WebhookPanel:
    webhook: Webhook | None
    notifications: list[Notification]


def webhook_panel(queue: Queue) -> WebhookPanel:
    hook = Webhook.objects.filter(queue=queue).first()
    if hook is None:
        return WebhookPanel(None, [])
    tries = Prefetch("deliveries", queryset=Delivery.objects.order_by("attempt"))
    notes = list(hook.notifications.prefetch_related(tries).order_by("-created_at", "-id")[:SHOWN])
    return WebhookPanel(hook, notes)
