"""One POST of a notification to its webhook, with the standard library's http.client.

Not urllib.request's opener: it follows redirects, takes proxies from the environment and opens
file: and ftp: URLs, and each of those is a way around the address check. Here the connection
itself resolves the name, checks every address (addresses.py), and connects only to a checked
one, so what was checked is what is called; a redirect is recorded as the answer, not followed.
"""

from __future__ import annotations

import functools
import http.client
import socket
import ssl
from typing import Any, NamedTuple

from .addresses import RefusedAddress, Target, check_host, split_url

TIMEOUT_SECONDS = 5.0


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
) -> Answer:
    """POST `body` to `url`; every failure (refused, unreachable, timed out) is an Answer."""
    try:
        target = split_url(url)
    except RefusedAddress as exc:
        return Answer(None, f"refused: {exc}")
    conn = _connection(target, allow_private=allow_private, timeout=timeout)
    try:
        conn.request("POST", target.path, body=body, headers=headers)
        response = conn.getresponse()
        status, reason = response.status, response.reason
    except RefusedAddress as exc:
        return Answer(None, f"refused: {exc}")
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, f"{type(exc).__name__}: {exc}"[:500])
    finally:
        conn.close()
    return Answer(status, "" if 200 <= status < 300 else f"answered {status} {reason}"[:500])


def _connection(
    target: Target, *, allow_private: bool, timeout: float
) -> http.client.HTTPConnection:
    connect = functools.partial(_connect_checked, allow_private=allow_private)
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
) -> socket.socket:
    host, port = address
    found = check_host(host, port, allow_private=allow_private, must_resolve=True)
    last: OSError = OSError(f"{host} has no address")
    for family, kind, proto, _, sockaddr in found:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        return sock
    raise last
