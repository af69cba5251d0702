"""A worker's last claim on a queue, for the workers page: written on a claim at most once a
minute per worker and process, so an idle worker's claims cost a dictionary look-up, not a
database write each."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time

from django.db import DatabaseError
from django.utils import timezone

from queues.models import WorkerSighting

log = logging.getLogger(__name__)

SIGHTING_EVERY_SECONDS = 60.0
# Sightings older than this are deleted as the queue's next one is written: the workers page
# shows an hour, and worker names come and go with every restart of some pools.
KEPT = dt.timedelta(days=1)
# The process's memory of what it wrote: forgotten whole past this many workers (a forgotten
# one costs one more write).
REMEMBERED = 10_000

_written: dict[tuple[str, str, str], float] = {}
_lock = threading.Lock()


def saw(host: str, queue: str, worker: str, *, at: float | None = None) -> bool:
    """Note that `worker` claimed from the queue now; answers whether it was written. A database
    that refuses the write is logged and the claim goes on: the sighting is for the page."""
    key, at = (host, queue, worker), time.monotonic() if at is None else at
    with _lock:
        last = _written.get(key)
        if last is not None and at - last < SIGHTING_EVERY_SECONDS:
            return False
        if len(_written) >= REMEMBERED:
            _written.clear()
        _written[key] = at
    now = timezone.now()
    try:
        WorkerSighting.objects.update_or_create(
            host=host, queue=queue, worker=worker, defaults={"seen_at": now}
        )
        WorkerSighting.objects.filter(host=host, queue=queue, seen_at__lt=now - KEPT).delete()
    except DatabaseError as exc:
        with _lock:
            _written.pop(key, None)  # the next claim tries again
        log.warning("could not note worker %r on %s/%s: %s", worker, host, queue, exc)
        return False
    return True


def forget() -> None:
    """Forget what this process wrote (tests; a test database starts empty)."""
    with _lock:
        _written.clear()
