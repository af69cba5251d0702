"""A request body is never read past what its queue could take (queues.api.parsers.body_cap):
a declared Content-Length over that is refused with 413 before a byte of the body is read, and
a chunked body is read in pieces and refused once past it, the rest never read. A body within
it is read and checked as before (the store's own 413 names the item). tests/api_live has the
refusal through a real gunicorn, before the client has sent the body."""

from __future__ import annotations

import orjson
import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
TASKS = url(HOST, QUEUE)
# api.md's caps, as numbers: a body 4 times the queue's maxItemBytes (64 KiB here) and 64 KiB,
# a batch's 100 times (4 times maxItemBytes and 16 KiB) and 64 KiB, both under the server's
ROOM = 65536
SINGLE = 4 * 65536 + ROOM
SERVER = 16 * 1024 * 1024 + 65536
READ_BYTES = 64 * 1024  # the most read at once


class EndlessBody:
    """A body that never ends (`{"a": "xxxx...`), counting what the server read of it."""

    def __init__(self) -> None:
        self.read_bytes, self.largest_read, self.reads = 0, 0, 0

    def read(self, size: int = -1) -> bytes:
        assert size is not None and size >= 0, "a read of the whole body would never end"
        self.reads += 1
        self.largest_read = max(self.largest_read, size)
        start = b'{"a": "' if self.read_bytes == 0 else b""
        piece = (start + b"x" * size)[:size]
        self.read_bytes += len(piece)
        return piece

    def readline(self, size: int = -1) -> bytes:  # never asked of a JSON body
        raise AssertionError("readline")


def declared(client, path: str, length: int, stream: EndlessBody):
    """A post whose Content-Length says `length`, its body read (if at all) from `stream`."""
    extra = {"CONTENT_LENGTH": str(length), "CONTENT_TYPE": "application/json",
             "wsgi.input": stream}  # fmt: skip
    return client.generic("POST", path, content_type=None, **extra)


@pytest.mark.parametrize(
    ("who", "path", "batch"),
    [
        ("alice", TASKS, False),
        ("bob", url(HOST, QUEUE, "claim"), False),
        ("bob", f"{TASKS}/0123456789abcdef/result", False),
        ("alice", url(HOST, QUEUE, "tasks/batch"), True),
    ],
)
def test_a_declared_length_over_the_queues_cap_is_413_before_a_byte_is_read(
    world, who, path, batch
):
    """16 MiB is under the server's cap (16 MiB + 64 KiB) but far over what one item of 64
    KiB can be written in: refused on its Content-Length, the body left unread."""
    world.store  # opened first: a new store makes its log directory, no request does
    before = world.written()
    stream = EndlessBody()
    length = 16 * 1024 * 1024
    limit = SINGLE
    if batch:  # a batch may carry 100 items: its cap is the server's here
        length = limit = SERVER
        length += 1
    r = declared(world.client(who), path, length, stream)
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large"), r.content
    assert stream.reads == 0
    assert r.json()["detail"].startswith(f"The request body is {length} bytes, over ")
    assert f"cap of {limit} bytes" in r.json()["detail"]
    assert world.written() == before


def test_the_refusal_names_the_queues_cap_and_how_it_is_made(world):
    r = declared(world.client("alice"), TASKS, 16 * 1024 * 1024, EndlessBody())
    assert r.json()["detail"] == (
        f"The request body is 16777216 bytes, over this queue's cap of {SINGLE} bytes on this "
        "request's body (4 times its maxItemBytes and 65536 bytes)."
    )


def test_a_chunked_body_is_read_in_pieces_and_refused_once_past_the_cap(world):
    """Of a body that never ends, the cap and one byte are read, in pieces of at most
    READ_BYTES: the rest is never read, nor held."""
    world.store
    before = world.written()
    stream = EndlessBody()
    extra = {"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_TYPE": "application/json",
             "wsgi.input": stream, "wsgi.input_terminated": True}  # fmt: skip
    r = world.client("alice").generic("POST", TASKS, content_type=None, **extra)
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large"), r.content
    assert stream.read_bytes == SINGLE + 1
    assert stream.largest_read <= READ_BYTES
    assert r.json()["detail"].startswith(f"The request body is more than {SINGLE} bytes, over ")
    assert world.written() == before


def test_a_body_written_loosely_within_the_cap_is_read_and_posted(world):
    """An item at the queue's cap written with \\u escapes (about 3 times its compact size)
    is taken: the body's cap leaves room for how JSON may be written."""
    queue = world.queues["own"]
    queue.max_item_bytes = 100_000
    queue.save()
    item = {"s": "\u00e9" * 49_990}  # 99,987 bytes as compact JSON
    body = orjson.dumps(item).replace("\u00e9".encode(), b"\\u00e9")
    assert len(orjson.dumps(item)) <= 100_000 and len(body) > 2 * 100_000 + ROOM
    r = world.client("alice").post(TASKS, body, content_type="application/json")
    assert r.status_code == 201, r.content
    assert world.store.read(HOST, QUEUE, r.json()["id"]).item == item


def test_a_batch_is_held_to_the_batch_cap_not_to_one_items(world):
    entries = [{"item": {"s": "x" * 60_000}} for _ in range(6)]  # 360 KB: past one item's cap
    body = orjson.dumps({"tasks": entries})
    assert len(body) > SINGLE
    r = world.client("alice").post(url(HOST, QUEUE, "tasks/batch"), body,
                                   content_type="application/json")  # fmt: skip
    assert r.status_code == 201, r.content
    assert len(r.json()["tasks"]) == 6


def test_a_small_queue_cap_leaves_the_item_refusal_to_the_store(world):
    """Within the body's cap the item is read, and the store's refusal names the item."""
    queue = world.queues["own"]
    queue.max_item_bytes = 100
    queue.save()
    r = world.client("alice").post(TASKS, {"a": "x" * 2000}, format="json")
    assert r.json()["detail"] == (
        "The item is 2008 bytes, over this queue's cap of 100 bytes (its maxItemBytes)."
    )


def test_the_servers_cap_binds_when_it_is_lower(world, settings):
    settings.TASKHOSTER_MAX_BODY_BYTES = 1000
    r = declared(world.client("alice"), TASKS, 5000, EndlessBody())
    assert r.json()["detail"] == (
        "The request body is 5000 bytes, over this server's cap of 1000 bytes on any request "
        "body (TASKHOSTER_MAX_BODY_BYTES)."
    )
