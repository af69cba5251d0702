"""A chunked request body (Transfer-Encoding: chunked, no Content-Length) is read where the
server de-chunks it and says so (wsgi.input_terminated, as gunicorn does), refused with 411
where it does not: never taken for a request without a body. tests/api_live has the same
through a real gunicorn."""

import io

import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
TASKS = url(HOST, QUEUE)


def chunked(client, path, body: bytes, *, terminated=True, content_type="application/json"):
    """A post as a WSGI server hands a de-chunked body over: no CONTENT_LENGTH at all."""
    extra = {"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_TYPE": content_type,
             "wsgi.input": io.BytesIO(body)}  # fmt: skip
    if terminated:
        extra["wsgi.input_terminated"] = True
    return client.generic("POST", path, content_type=None, **extra)


def test_a_chunked_post_is_read_and_posted(world):
    r = chunked(world.client("alice"), TASKS, b'{"url": "https://ex.com/a.png"}')
    assert r.status_code == 201, r.content
    assert world.store.read(HOST, QUEUE, r.json()["id"]).item == {"url": "https://ex.com/a.png"}


def test_a_chunked_claim_and_result_are_read(world):
    task = world.post()
    r = chunked(world.client("bob"), url(HOST, QUEUE, "claim"), b'{"worker": "box-1"}')
    assert (r.status_code, r.json()["id"]) == (200, task.id), r.content
    body = b'{"worker": "box-1", "attempt": 1, "result": {"ok": true}}'
    r = chunked(world.client("bob"), f"{TASKS}/{task.id}/result", body)
    assert r.status_code == 200, r.content
    assert world.store.read(HOST, QUEUE, task.id).result == {"ok": True}


def test_a_chunked_body_where_the_server_cannot_end_it_is_411(world):
    before = world.written()
    r = chunked(world.client("alice"), TASKS, b'{"n": 1}', terminated=False)
    assert (r.status_code, r.json()["code"]) == (411, "length_required"), r.content
    assert "Content-Length" in r.json()["detail"]
    assert world.written() == before


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"", "application/json", 400, "invalid_json"),
        (b'{"a": 1, "a": 2}', "application/json", 400, "invalid_json"),
        (b'{"n": 1}', "text/plain", 415, "unsupported_media_type"),
        (b'{"n": 1}', "", 415, "unsupported_media_type"),
    ],
)
def test_a_bad_chunked_body_is_refused_as_any_body(world, body, content_type, status, code):
    before = world.written()
    r = chunked(world.client("alice"), TASKS, body, content_type=content_type)
    assert (r.status_code, r.json()["code"]) == (status, code), r.content
    assert world.written() == before


def test_a_chunked_body_over_the_site_cap_is_413(world, settings):
    settings.TASKHOSTER_MAX_BODY_BYTES = 1000
    before = world.written()
    r = chunked(world.client("alice"), TASKS, b'{"a": "' + b"x" * 2000 + b'"}')
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large"), r.content
    # read as far as one byte past the cap: its full length is never known
    assert "is more than 1000 bytes, over" in r.json()["detail"]
    assert world.written() == before
