"""Where an archived payload is served: one address per task-wide file (the item, the progress
lines), and one per event for a result or an error, named by the event line's own `attempts`
and `event` (the store archives each attempt's bodies apart; an item an operator edited before a
retry is the `retried` event's own file too)."""

from __future__ import annotations

from django.urls import reverse

from queues.store.archive import is_event_payload


def payload_url(
    host: str, queue: str, task_id: str, kind: str, *, attempts: int, event: str
) -> str:
    """The page that shows the payload with what it is; it links the raw file."""
    if is_event_payload(kind, event):
        args = [host, queue, task_id, kind, attempts, event]
        return reverse("tasklogs:event-payload-page", args=args)
    return reverse("tasklogs:payload-page", args=[host, queue, task_id, kind])


def payload_label(kind: str, *, attempts: int, event: str) -> str:
    if kind == "item" and is_event_payload(kind, event):
        return f"item edited after attempt {attempts}"
    return f"{kind} of attempt {attempts} ({event})" if is_event_payload(kind, event) else kind
