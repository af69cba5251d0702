"""Through a real gunicorn: a body larger than its queue could take is refused with 413 before
the client has sent it. A declared Content-Length over the cap is answered on the headers
alone; a chunked body is answered once past the cap, while the client still has most of it to
send. (An unbounded read would wait for the rest, and hold it.)"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import pytest

from .live import HOST

pytestmark = pytest.mark.slow
PATH = f"/api/v1/queues/{HOST}/chunked/tasks"
CAP = 4 * 65536 + 65536  # api.md: 4 times the queue's maxItemBytes (64 KiB), and 64 KiB
DECLARED = 16 * 1024 * 1024  # under the server's own cap (16 MiB + 64 KiB)


def connect(live) -> socket.socket:
    where = urlsplit(live.url)
    sock = socket.create_connection((where.hostname, where.port), timeout=10)
    sock.settimeout(10)  # the answer must come without the rest of the body
    return sock


def head(live, token: str, framing: str) -> bytes:
    return (
        f"POST {PATH} HTTP/1.1\r\nHost: {urlsplit(live.url).netloc}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


def answer(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    headers, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in headers.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))  # fmt: skip
    while len(body) < length:
        body += sock.recv(65536)
    return int(headers.split(b" ")[1]), json.loads(body)


def test_a_declared_length_over_the_cap_is_answered_before_the_body_is_sent(live):
    with connect(live) as sock:
        sock.sendall(head(live, live.tokens["paul"], f"Content-Length: {DECLARED}"))
        sock.sendall(b'{"a": "' + b"x" * 1000)  # a start, and nothing more
        status, body = answer(sock)
    assert (status, body["code"]) == (413, "payload_too_large"), body
    assert body["detail"].startswith(f"The request body is {DECLARED} bytes, over this queue's")


def test_a_chunked_body_is_answered_once_past_the_cap_not_at_its_end(live):
    with connect(live) as sock:
        sock.sendall(head(live, live.tokens["paul"], "Transfer-Encoding: chunked"))
        piece = b"x" * 65536
        sock.sendall(b"7\r\n" + b'{"a": "' + b"\r\n")
        # past the cap by a piece, then the client waits with its body unended. No more: the
        # server answers and closes once past the cap, and bytes it never read would make its
        # kernel reset the connection, the answer with it (a CI run's broken pipe)
        for _ in range(CAP // len(piece) + 1):
            sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
        status, body = answer(sock)
    assert (status, body["code"]) == (413, "payload_too_large"), body
    assert body["detail"].startswith(f"The request body is more than {CAP} bytes, over")
