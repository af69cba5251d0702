"""How many requests of one server process may wait at once (waiting claims and reads, event
streams).

Each waiting request holds one of the process's gunicorn threads for up to 60 s, an event stream
for as long as its client stays. Past `TASKHOSTER_MAX_WAITING` of them together, a new one is
answered at once instead of waiting, so a few threads always stay free for everything else. A
claim answered that way carries `Retry-After`, so its worker comes back a moment later instead
of asking again at once. Streams may take at most `TASKHOSTER_MAX_STREAMS` of those threads, so
a crowd of monitors cannot turn every waiting claim into polling.
"""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings

CROWDED_RETRY_AFTER_SECONDS = 1

_lock = threading.Lock()
_waiting = 0  # everything that holds a thread: waiting claims and reads, and streams
_streams = 0
# Called with (held, of which streams) after each change, under the lock: quick, never raising
# (queues.metrics counts them).
_observers: list[Callable[[int, int], None]] = []


def watch(observer: Callable[[int, int], None]) -> None:
    with _lock:
        if observer not in _observers:
            _observers.append(observer)


def _changed() -> None:
    for observe in _observers:
        observe(_waiting, _streams)


@contextmanager
def slot() -> Iterator[bool]:
    """Yields whether this request may wait; the slot is free again when the block ends."""
    global _waiting
    with _lock:
        granted = _waiting < settings.TASKHOSTER_MAX_WAITING
        if granted:
            _waiting += 1
            _changed()
    try:
        yield granted
    finally:
        if granted:
            with _lock:
                _waiting -= 1
                _changed()


def take_stream() -> bool:
    """Whether an event stream may hold a thread now; if so, release_stream() when it ends."""
    global _waiting, _streams
    with _lock:
        if (
            _waiting >= settings.TASKHOSTER_MAX_WAITING
            or _streams >= settings.TASKHOSTER_MAX_STREAMS
        ):
            return False
        _waiting += 1
        _streams += 1
        _changed()
        return True


def release_stream() -> None:
    global _waiting, _streams
    with _lock:
        _waiting -= 1
        _streams -= 1
        _changed()


def held() -> tuple[int, int]:
    """(threads held waiting, of which by streams), for tests and the curious."""
    with _lock:
        return _waiting, _streams
