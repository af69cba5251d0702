"""One POST of a notification to its webhook, with the standard library's http.client.

Not urllib.request's opener: it follows redirects, takes proxies from the environment and opens
file: and ftp: URLs, and each of those is a way around the address check. Here the connection
itself resolves the name, checks every address (addresses.py), and connects only to a checked
one, so what was checked is what is called; a redirect is recorded as the answer, not followed.

http.client's timeout is per socket operation: a receiver that sends a byte every few seconds
never trips it. Each call therefore also has a deadline for the whole of it, connect to the last
header byte: when it passes, a timer shuts the socket down, which ends whatever read or write
is blocked on it (plain or TLS alike), and the call is answered as timed out.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import threading
import time
from typing import Any, NamedTuple

from .addresses import RefusedAddress, Target, check_host, split_url

TIMEOUT_SECONDS = 5.0  # one connect, read or write
DEADLINE_SECONDS = 10.0  # the whole call


class Answer(NamedTuple):
    status: int | None  # the receiver's status code; None when none came
    error: str  # "" when the receiver took it (2xx)

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    allow_private: bool,
    timeout: float = TIMEOUT_SECONDS,
    deadline: float = DEADLINE_SECONDS,
) -> Answer:
    """POST `body` to `url`, giving up after `deadline` seconds in all; every failure (refused,
    unreachable, timed out) is an Answer."""
    try:
        target = split_url(url)
    except RefusedAddress as exc:
        return Answer(None, f"refused: {exc}")
    ends = time.monotonic() + deadline
    conn = _connection(target, allow_private=allow_private, timeout=timeout, ends=ends)
    cutter = _Cutter(conn)
    timer = threading.Timer(deadline, cutter.cut)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        if time.monotonic() >= ends:  # the deadline passed while connecting, before a socket
            raise TimeoutError
        conn.request("POST", target.path, body=body, headers=headers)
        response = conn.getresponse()
        status, reason = response.status, response.reason
    except RefusedAddress as exc:
        return Answer(None, f"refused: {exc}")
    except (OSError, http.client.HTTPException) as exc:
        if cutter.was_cut or time.monotonic() >= ends:
            return Answer(None, f"timed out: no whole answer within the {deadline:g} s deadline")
        return Answer(None, f"{type(exc).__name__}: {exc}"[:500])
    finally:
        timer.cancel()
        cutter.close()
    return Answer(status, "" if 200 <= status < 300 else f"answered {status} {reason}"[:500])


class _Cutter:
    """Shuts a connection's socket down from the deadline's timer thread, or closes it after the
    call; the lock keeps the two apart, so the timer never touches a closed (reused) socket."""

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn, self.was_cut, self.closed = conn, False, False
        self.lock = threading.Lock()

    def cut(self) -> None:
        with self.lock:
            if self.closed or self.conn.sock is None:
                return  # done, or still connecting: the connect's own timeout bounds that
            self.was_cut = True
            # socket.socket's own shutdown, also for a TLS socket: it wakes the blocked read at
            # once, without the TLS layer's shutdown touching the reading thread's state;
            # OSError: the receiver closed it first
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self.conn.sock, socket.SHUT_RDWR)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.conn.close()


def _connection(
    target: Target, *, allow_private: bool, timeout: float, ends: float
) -> http.client.HTTPConnection:
    connect = functools.partial(_connect_checked, allow_private=allow_private, ends=ends)
    conn: http.client.HTTPConnection
    if target.scheme == "https":
        conn = http.client.HTTPSConnection(
            target.host, target.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    # The hook http.client itself connects through; TLS still verifies the certificate against
    # the URL's host name, since the wrapping uses `conn.host`, not the address.
    conn._create_connection = connect  # type: ignore[attr-defined]
    return conn


def _connect_checked(
    address: tuple[str, int],
    timeout: Any = None,
    source_address: Any = None,
    *,
    allow_private: bool,
    ends: float,
) -> socket.socket:
    host, port = address
    found = check_host(host, port, allow_private=allow_private, must_resolve=True)
    last: OSError = OSError(f"{host} has no address")
    for family, kind, proto, _, sockaddr in found:
        left = ends - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock = socket.socket(family, kind, proto)
        try:
            # each address's try ends by the call's deadline; the later reads and writes keep
            # the per-operation timeout, and the deadline's timer ends them
            sock.settimeout(left if timeout is None else min(timeout, left))
            sock.connect(sockaddr)
            sock.settimeout(timeout)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        return sock
    raise last
