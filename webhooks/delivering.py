"""Sending the notifications that are due, signed, and recording every try and its answer.

At least once: a notification is taken by a conditional update before it is sent, so two
sweeps never send it at the same time, but a sweep killed after the receiver took it and before
the answer was recorded sends it again later. Receivers drop repeats by the
Taskhoster-Notification header.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

from .models import Delivery, Notification, State
from .sending import DEADLINE_SECONDS, post
from .signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature

MAX_TRIES = 5
# After the first, second, ... failed try; the fifth failed try gives up (about 36 minutes).
RETRY_DELAYS = tuple(dt.timedelta(seconds=s) for s in (10, 60, 300, 1800))
# A try in flight holds its notification this long, so that another sweep leaves it alone.
SENDING_HOLD = dt.timedelta(seconds=60)
# The sends of one pass end within this long: a send starts only while its whole deadline
# (sending.DEADLINE_SECONDS) fits in what is left, and the rest stay due for the next pass, so
# slow receivers hold up the sweep loop's own work (timeouts, leases) by this much at most.
PASS_SECONDS = 20.0
BATCH = 50


@dataclass(kw_only=True)
class DeliveryReport:
    delivered: int = 0
    failed: int = 0  # tries that failed; the notification is retried or given up


def deliver_due(
    *,
    now: dt.datetime,
    allow_private: bool,
    deadline: float = DEADLINE_SECONDS,
    pass_seconds: float = PASS_SECONDS,
) -> DeliveryReport:
    """Send what is due, each call ending by `deadline` seconds and all of them by
    `pass_seconds`; what is not started stays due, untouched, for the next pass."""
    report = DeliveryReport()
    deadline = min(deadline, pass_seconds)  # or no send would ever start
    ends = time.monotonic() + pass_seconds
    due = (
        Notification.objects.filter(state=State.PENDING, next_try_at__lte=now)
        .select_related("webhook")
        .order_by("next_try_at", "id")[:BATCH]
    )
    for note in due:
        if time.monotonic() + deadline > ends:
            break  # the rest wait for the next pass
        if not _take(note, now=now):
            continue  # another sweep took it
        deliver(note, now=now, allow_private=allow_private, deadline=deadline)
        if note.state == State.DELIVERED:
            report.delivered += 1
        else:
            report.failed += 1
    return report


def deliver(
    note: Notification,
    *,
    now: dt.datetime,
    allow_private: bool,
    deadline: float = DEADLINE_SECONDS,
) -> Delivery:
    """One try: POST the body, signed now, record the answer and what happens next."""
    attempt = note.tries + 1
    body, stamp = note.body.encode(), int(now.timestamp())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "taskhoster-webhook/1",
        "Taskhoster-Event": note.kind,
        "Taskhoster-Notification": str(note.pk),
        "Taskhoster-Attempt": str(attempt),
        TIMESTAMP_HEADER: str(stamp),
        SIGNATURE_HEADER: signature(note.webhook.secret, stamp, body),
    }
    url = note.webhook.url
    answer = post(url, body, headers, allow_private=allow_private, deadline=deadline)
    delivery = Delivery.objects.create(
        notification=note, attempt=attempt, sent_at=now, url=url,
        status_code=answer.status, error=answer.error,
    )  # fmt: skip
    if answer.delivered:
        state, next_try = State.DELIVERED, note.next_try_at
    elif attempt >= MAX_TRIES:
        state, next_try = State.GAVE_UP, note.next_try_at
    else:
        state, next_try = State.PENDING, now + RETRY_DELAYS[attempt - 1]
    Notification.objects.filter(pk=note.pk).update(tries=attempt, state=state, next_try_at=next_try)
    note.tries, note.state, note.next_try_at = attempt, state, next_try
    return delivery


def _take(note: Notification, *, now: dt.datetime) -> bool:
    held = now + SENDING_HOLD
    taken = Notification.objects.filter(
        pk=note.pk, state=State.PENDING, tries=note.tries, next_try_at=note.next_try_at
    ).update(next_try_at=held)
    note.next_try_at = held
    return taken == 1
