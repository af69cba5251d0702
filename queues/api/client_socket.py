"""Whether the client of a request is still there: its connection not closed.

gunicorn hands the request's socket over in the WSGI environ (`gunicorn.socket`). A client
that closed its connection (its process ended, it was killed, it gave up waiting) has sent
its FIN, or its kernel a reset: poll() tells either at once, without reading a byte and
whatever the socket is (TLS too). A client never half-closes an HTTP/1.1 connection while it
waits for an answer, so a connection with nothing more to read from is one nobody reads from.
Under a server that hands no socket over (Django's test client, runserver) the answer is
always yes: nothing changes there.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable
from typing import Any

GONE = select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL


def still_connected(meta: dict[str, Any]) -> Callable[[], bool]:
    """A check, cheap to call often (one poll(2) with no wait), that the request's client has
    not closed its connection."""
    sock = meta.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return _always
    if sock.fileno() < 0:  # closed already, by the server
        return _never
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLRDHUP)

    def connected() -> bool:
        try:
            return not any(events & GONE for _, events in poller.poll(0))
        except OSError:
            return False

    return connected


def _always() -> bool:
    return True


def _never() -> bool:
    return False
