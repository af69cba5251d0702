"""A queue crossing its pending threshold: one notification per crossing, not one per pass."""

from __future__ import annotations

import datetime as dt

import orjson
from django.db import transaction

from queues.store import NotFound
from queues.store.eventlog import iso_ms
from queues.stores.router import StoreOf

from .models import Kind, Notification, Webhook


def notify_pending(store_of: StoreOf, *, now: dt.datetime) -> int:
    """Notify each queue that rose above its threshold since the last pass; re-arm each that
    fell back. Answers how many notifications were made."""
    made = 0
    now_ms = int(now.timestamp() * 1000)
    for hook in Webhook.objects.filter(pending_threshold__gt=0).select_related("queue__host"):
        host, queue = hook.queue.host.name, hook.queue.name
        store = store_of(host, queue)
        if not store.holds_queue(host, queue):
            # a file queue served by another server, whose sweep judges it: read here it would
            # look empty, re-arm the alert and let the other server fire it again on every pass
            continue
        try:
            pending = store.stats(host, queue, now=now_ms).pending
        except NotFound:  # never posted to
            pending = 0
        above = pending > hook.pending_threshold
        if above == hook.pending_alerted:
            continue
        with transaction.atomic():
            # Conditional, so that of two sweeps seeing the same crossing one notifies.
            flipped = Webhook.objects.filter(pk=hook.pk, pending_alerted=not above).update(
                pending_alerted=above
            )
            if flipped and above:
                body = {
                    "event": Kind.QUEUE_PENDING.value,
                    "host": host,
                    "queue": queue,
                    "pending": pending,
                    "threshold": hook.pending_threshold,
                    "at": iso_ms(now_ms),  # as task.failed says it, and the event log
                }
                Notification.objects.create(
                    webhook=hook,
                    kind=Kind.QUEUE_PENDING,
                    source=f"pending:{hook.pk}:{now_ms}",
                    body=orjson.dumps(body).decode(),
                    next_try_at=now,
                    created_at=now,
                )
                made += 1
    return made
