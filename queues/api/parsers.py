"""JSON in and out with orjson, and api.md's limits on what a body may be.

orjson already refuses invalid UTF-8, a BOM, NaN/Infinity, numbers that overflow to infinity,
lone surrogates and nesting past 1024. What it accepts silently, and api.md refuses, is checked
here afterwards: nesting deeper than 64 and duplicate keys (orjson keeps the last one). It also
reads an integer outside the 64-bit range as a float, so 2**64 would be stored as
1.8446744073709552e19: a changed value, refused here like any number that cannot be kept.
"""

import json
import re
from typing import Any, NamedTuple

import orjson
from django.conf import settings
from rest_framework.exceptions import APIException, ParseError, UnsupportedMediaType
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from queues.store import MAX_BATCH
from queues.store.errors import PayloadTooLarge
from queues.store.settings import QueueSettings

MAX_DEPTH = 64
NO_BODY = "The request has no body: send a JSON document."
# The integers orjson keeps exactly (int64 and uint64); outside, it reads a float.
INT_LOW, INT_HIGH = -(2**63), 2**64 - 1
_FLOAT_FROM_INT = float(2**63)  # a float this large and whole may have been an integer literal
# A JSON string, written unrolled so the regex engine never backtracks.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


# A body is read this much at a time, never whole in one read: a body over its cap is refused
# holding at most the cap and one piece.
READ_BYTES = 64 * 1024
# How much larger than its compact JSON a body may be written (whitespace, \u escapes: 6 bytes
# for a character compact JSON writes in 1 to 3), and the room for the rest of a body (worker,
# attempt, a batch entry's keys): past these a body cannot hold what the queue would take.
WRITTEN_AS = 4
BODY_ROOM_BYTES = 64 * 1024
ENTRY_ROOM_BYTES = 16 * 1024


def max_body_bytes() -> int:
    """The raw body cap; the store enforces each queue's own cap on the item, progress, result."""
    return int(settings.TASKHOSTER_MAX_BODY_BYTES)


class BodyCap(NamedTuple):
    limit: int
    named: str  # how a refusal names it


def body_cap(queue: QueueSettings, *, batch: bool = False) -> BodyCap:
    """The most bytes a request body to this queue may be, and how a refusal names that cap:
    what its items (one, or a batch's MAX_BATCH), progress report or result could be at the
    queue's maxItemBytes, written loosely, or the server's own cap when that is lower. A body
    past it is refused before it is read: it could only be refused after."""
    carried = WRITTEN_AS * queue.max_item_bytes
    if batch:
        limit = MAX_BATCH * (carried + ENTRY_ROOM_BYTES) + BODY_ROOM_BYTES
        why = (f"{MAX_BATCH} entries of {WRITTEN_AS} times its maxItemBytes and "
               f"{ENTRY_ROOM_BYTES} bytes each, and {BODY_ROOM_BYTES} bytes")  # fmt: skip
    else:
        limit = carried + BODY_ROOM_BYTES
        why = f"{WRITTEN_AS} times its maxItemBytes and {BODY_ROOM_BYTES} bytes"
    server = max_body_bytes()
    if server <= limit:
        return BodyCap(server, server_cap(server))
    return BodyCap(limit, f"this queue's cap of {limit} bytes on this request's body ({why})")


def server_cap(limit: int, setting: str = "TASKHOSTER_MAX_BODY_BYTES") -> str:
    return f"this server's cap of {limit} bytes on any request body ({setting})"


def body_too_large(size: int, limit: int, cap: str | None = None, *, more: bool = False) -> (
    PayloadTooLarge
):  # fmt: skip
    """413 for a cap on a whole request body (`cap` names it: the server's by default), named so
    that it is not taken for the queue's own cap on an item (the store's refusal names that
    one). `more`: a body of no declared length, read as far as `size` bytes and not to its end."""
    cap = cap or server_cap(limit)
    sized = f"more than {limit}" if more else f"{size}"
    return PayloadTooLarge(
        "request body",
        size,
        limit,
        detail=f"The request body is {sized} bytes, over {cap}.",
    )


def read_capped(stream: Any, limit: int, cap: str | None = None) -> bytes:
    """Up to `limit` bytes of `stream` to its end, READ_BYTES at a time; past `limit`, the
    refusal, having held no more than that and one piece."""
    pieces, size = [], 0
    while True:
        piece = stream.read(min(READ_BYTES, limit + 1 - size))
        if not piece:
            return b"".join(pieces)
        size += len(piece)
        if size > limit:
            raise body_too_large(size, limit, cap, more=True)
        pieces.append(piece)


def loads(data: bytes) -> Any:
    """Parse a request body strictly; ParseError (400 invalid_json) for anything api.md refuses."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"The body is not JSON: {exc}.") from None
    keys, suspect = _check_depth_and_count_keys(value)
    # Outside strings a colon only ever separates a key from its value, so fewer keys parsed
    # than colons written means a key was repeated and orjson dropped one of its values.
    if keys and _STRING.sub(b"", data).count(b":") != keys:
        raise ParseError("The body repeats a key inside one object.")
    if suspect or _is_big_float(value):
        _check_integers(data)
    return value


def _check_depth_and_count_keys(value: Any) -> tuple[int, bool]:
    """The keys counted, and whether a float is large and whole enough to have been an integer
    orjson could not keep. An explicit stack, not recursion: a hostile body must not reach
    Python's recursion limit."""
    keys, suspect = 0, False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
            keys += len(node)
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            raise ParseError(f"The body nests deeper than {MAX_DEPTH} levels.")
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif not suspect and _is_big_float(child):
                suspect = True
    return keys, suspect


def _is_big_float(value: Any) -> bool:
    return isinstance(value, float) and abs(value) >= _FLOAT_FROM_INT and value.is_integer()


def _check_integers(data: bytes) -> None:
    """Read the body again with Python's parser, which keeps integers exact, and refuse one that
    orjson turned into a float. Only bodies with a suspect float pay for this second read; the
    depth is checked already, so it cannot recurse too far."""

    def exact(literal: str) -> int:
        number = int(literal)
        if not INT_LOW <= number <= INT_HIGH:
            raise ParseError(
                f"The body has an integer outside the 64-bit range ({literal[:30]}), which "
                "would not be stored exactly; send it as a string."
            )
        return number

    try:
        json.loads(data, parse_int=exact)
    except ValueError as exc:  # orjson read it; should Python's parser not, refuse it as well
        raise ParseError(f"The body is not JSON: {exc}.") from None


class LengthRequired(APIException):
    """A chunked body the server in front of Django cannot de-chunk for it."""

    status_code = 411
    default_detail = (
        "This server cannot read a chunked request body: send the body with a Content-Length."
    )
    default_code = "length_required"


def is_chunked(request: Any) -> bool:
    """Whether the body comes chunked, without a Content-Length (HTTP/1.1's Transfer-Encoding).

    Django reads no CONTENT_LENGTH as an empty body, and DRF then parses nothing: a chunked
    post would be taken for one without a body."""
    meta = request.META
    return "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower() and not meta.get(
        "CONTENT_LENGTH"
    )


def chunked_body(request: Any, limit: int, cap: str | None = None) -> Any:
    """The parsed JSON of a chunked body, read straight from the WSGI input, in pieces, and
    refused once past `limit` bytes (`cap` names it) without reading the rest.

    Only a server that says it ends the input where the body ends (`wsgi.input_terminated`,
    as gunicorn does after de-chunking) is read: on another, a read without a length would
    wait for bytes the client never sends, so the request is refused with 411."""
    meta = request.META
    if not meta.get("wsgi.input_terminated"):
        raise LengthRequired()
    parser = request.negotiator.select_parser(request, request.parsers)
    if parser is None:
        raise UnsupportedMediaType(
            request.content_type, detail="Send the body as Content-Type: application/json."
        )
    return parse_json(read_capped(meta["wsgi.input"], limit, cap))


def parse_json(data: bytes) -> Any:
    if not data:  # a chunked body of no chunks
        raise ParseError(NO_BODY)
    return loads(data)


class JSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = max_body_bytes()
        request = (parser_context or {}).get("request")
        declared = content_length(request)
        if declared > limit:
            raise body_too_large(declared, limit)
        # Read in pieces up to one byte past the cap: a body without an honest Content-Length
        # still stops there.
        return parse_json(read_capped(stream, limit))


def content_length(request: Any) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
    except ValueError:
        return 0


class JSONRenderer(BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None  # JSON is UTF-8 by definition (RFC 8259); no charset parameter

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if data is None:
            return b""
        return orjson.dumps(data)
