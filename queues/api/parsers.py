"""JSON in and out with orjson, and api.md's limits on what a body may be.

orjson already refuses invalid UTF-8, a BOM, NaN/Infinity, numbers that overflow to infinity,
lone surrogates and nesting past 1024. What it accepts silently, and api.md refuses, is checked
here afterwards: nesting deeper than 64 and duplicate keys (orjson keeps the last one). It also
reads an integer outside the 64-bit range as a float, so 2**64 would be stored as
1.8446744073709552e19: a changed value, refused here like any number that cannot be kept.
"""

import json
import re
from typing import Any

import orjson
from django.conf import settings
from rest_framework.exceptions import APIException, ParseError, UnsupportedMediaType
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from queues.store.errors import PayloadTooLarge

MAX_DEPTH = 64
NO_BODY = "The request has no body: send a JSON document."
# The integers orjson keeps exactly (int64 and uint64); outside, it reads a float.
INT_LOW, INT_HIGH = -(2**63), 2**64 - 1
_FLOAT_FROM_INT = float(2**63)  # a float this large and whole may have been an integer literal
# A JSON string, written unrolled so the regex engine never backtracks.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def max_body_bytes() -> int:
    """The raw body cap; the store enforces each queue's own cap on the item, progress, result."""
    return int(settings.TASKHOSTER_MAX_BODY_BYTES)


def body_too_large(
    size: int, limit: int, setting: str = "TASKHOSTER_MAX_BODY_BYTES"
) -> PayloadTooLarge:
    """413 for the server-wide cap on a whole request body, named so that it is not taken
    for the queue's own cap on an item (the store's refusal names that one)."""
    return PayloadTooLarge(
        "request body",
        size,
        limit,
        detail=f"The request body is {size} bytes, over this server's cap of {limit} bytes on "
        f"any request body ({setting}).",
    )


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


def chunked_body(request: Any) -> Any:
    """The parsed JSON of a chunked body, read straight from the WSGI input.

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
    return parser.parse(meta["wsgi.input"], parser.media_type, {"request": request})


class JSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = max_body_bytes()
        request = (parser_context or {}).get("request")
        declared = content_length(request)
        if declared > limit:
            raise body_too_large(declared, limit)
        # Read one byte past the cap: a body without an honest Content-Length still stops there.
        data = stream.read(limit + 1)
        if len(data) > limit:
            raise body_too_large(len(data), limit)
        if not data:  # a chunked body of no chunks
            raise ParseError(NO_BODY)
        return loads(data)


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
