"""Which store holds each queue's tasks (the Queue model's `store`), as the router asks it on
every `stores.of(host, queue)`: looked up once and kept, forgotten when a queue or host is saved
or deleted in this process, and after TASKHOSTER_API_MEMO_SECONDS in any case (the API keeps a
queue's other settings as long) so that a change made in another process (another web server)
reaches this one too."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings

from queues.models import Queue, StoreKind

_kinds: dict[tuple[str, str], tuple[str, float]] = {}
_lock = threading.Lock()


def kind_of(host: str, queue: str) -> str:
    """'files' or 'postgres'; a queue the console does not know is a file queue (the file
    store keeps serving what is on disk for it, as before there was a choice)."""
    now = time.monotonic()
    with _lock:
        known = _kinds.get((host, queue))
    # trusted as long as the API trusts a queue's other settings (another process's change)
    if known is not None and now - known[1] < settings.TASKHOSTER_API_MEMO_SECONDS:
        return known[0]
    kind = (
        Queue.objects.filter(host__name=host, name=queue).values_list("store", flat=True).first()
        or StoreKind.FILES
    )
    with _lock:
        _kinds[(host, queue)] = (str(kind), now)
    return str(kind)


def postgres_queues() -> list[tuple[str, str]]:
    """Every configured queue whose store is PostgreSQL."""
    rows = Queue.objects.filter(store=StoreKind.POSTGRES).values_list("host__name", "name")
    return [(host, name) for host, name in rows]


def forget_kinds(**_signal: Any) -> None:
    """Drop every kept kind (a signal receiver: any queue or host saved or deleted)."""
    with _lock:
        _kinds.clear()
