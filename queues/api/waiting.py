"""How many requests of one server process may wait at once (waiting claims and reads).

Each waiting request holds one of the process's gunicorn threads for up to 60 s. Past
`TASKHOSTER_MAX_WAITING` of them, a new one is answered at once instead of waiting, so a few
threads always stay free for everything else. A claim answered that way carries
`Retry-After`, so its worker comes back a moment later instead of asking again at once.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

CROWDED_RETRY_AFTER_SECONDS = 1

_lock = threading.Lock()
_waiting = 0


@contextmanager
def slot() -> Iterator[bool]:
    """Yields whether this request may wait; the slot is free again when the block ends."""
    global _waiting
    with _lock:
        granted = _waiting < settings.TASKHOSTER_MAX_WAITING
        if granted:
            _waiting += 1
    try:
        yield granted
    finally:
        if granted:
            with _lock:
                _waiting -= 1
