"""One pass of failure notifications: what the sweep loop calls after the store's sweep."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings

from queues.stores.router import StoreRouter

from .delivering import deliver_due
from .failures import notify_failures
from .thresholds import notify_pending


@dataclass(frozen=True, kw_only=True)
class NotifyReport:
    made: int
    delivered: int
    failed: int


def notify(store: StoreRouter, *, now: dt.datetime) -> NotifyReport:
    """Turn new failures and threshold crossings into notifications, then send those due."""
    made = notify_failures(store, now=now) + notify_pending(store.of, now=now)
    sent = deliver_due(
        now=now,
        allow_private=settings.TASKHOSTER_WEBHOOK_ALLOW_PRIVATE,
        deadline=settings.TASKHOSTER_WEBHOOK_DEADLINE_SECONDS,
        pass_seconds=settings.TASKHOSTER_WEBHOOK_PASS_SECONDS,
    )
    return NotifyReport(made=made, delivered=sent.delivered, failed=sent.failed)
