"""A chunked request body through a real gunicorn: it de-chunks the body into wsgi.input and
says so (wsgi.input_terminated), and the API reads it as it reads a body with a Content-Length:
the post is the item sent, never an empty one, and a bad chunked body is refused as any."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from .live import HOST

pytestmark = pytest.mark.slow
BASE = f"/api/v1/queues/{HOST}/chunked"


def pieces(body: bytes, size: int = 7) -> Iterator[bytes]:
    """The body in chunks of `size` bytes: http.client sends an iterator chunked, with no
    Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def send(live, token: str, path: str, body: bytes, content_type="application/json"):
    where = urlsplit(live.url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=15)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
        conn.request("POST", path, body=pieces(body), headers=headers, encode_chunked=True)
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        conn.close()


def test_a_chunked_post_claim_and_result_go_through_gunicorn(live, clients):
    item = {"url": "https://ex.com/a.png", "words": ["chunked"] * 50}
    status, posted = send(live, live.tokens["paul"], f"{BASE}/tasks", json.dumps(item).encode())
    assert status == 201, posted
    status, claimed = send(live, live.tokens["wendy"], f"{BASE}/claim", b'{"worker": "box-1"}')
    assert (status, claimed["id"], claimed["item"]) == (200, posted["id"], item)
    body = json.dumps({"worker": "box-1", "attempt": 1, "result": {"ok": True}}).encode()
    status, done = send(live, live.tokens["wendy"], f"{BASE}/tasks/{posted['id']}/result", body)
    assert (status, done["status"]) == (200, "finished"), done
    assert clients["paul"].get(HOST, "chunked", posted["id"])["result"] == {"ok": True}


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"", "application/json", 400, "invalid_json"),
        (b'{"a": [1, 2', "application/json", 400, "invalid_json"),
        (b'{"n": 1}', "text/plain", 415, "unsupported_media_type"),
    ],
)
def test_a_bad_chunked_body_is_refused_through_gunicorn(live, body, content_type, status, code):
    got, answer = send(live, live.tokens["paul"], f"{BASE}/tasks", body, content_type)
    assert (got, answer["code"]) == (status, code), answer
