"""Whether this server process has been told to stop, so that event streams end and let it.

gunicorn's worker sets `alive = False` on SIGTERM, stops accepting, and waits up to its
graceful_timeout for its open connections before it is killed. A stream that never looked
would hold the worker that long and then be cut off mid-response; one that looks ends at its
next liveness check, and its client reconnects (to another worker, or once the server is back)
from its Last-Event-ID. gunicorn.conf.py hands the worker over once it has started.
"""

from __future__ import annotations

from collections.abc import Callable

_worker: object | None = None


def watch(worker: object) -> None:
    global _worker
    _worker = worker


def stopping() -> bool:
    return _worker is not None and not getattr(_worker, "alive", True)


def until_stopping(alive: Callable[[], bool]) -> Callable[[], bool]:
    """`alive`, and false as soon as this server process is stopping."""
    return lambda: not stopping() and alive()
