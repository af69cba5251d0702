"""An archived payload as a page: which task, queue, kind, attempt and event it belongs to, and
its JSON indented for reading, its texts of several lines shown as lines. The page shows at most
SHOWN_BYTES of it; the raw file is a link away, whole."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

SHOWN_BYTES = 512 * 1024


@dataclass(frozen=True, kw_only=True)
class PayloadText:
    text: str  # indented JSON, or the file's own text when it is cut short or not one document
    size: int  # the file's bytes
    cut: bool  # only the first SHOWN_BYTES are shown
    whole: bool = False  # the file is one JSON document, parsed into `document`
    document: Any = None


def readable(body: BinaryIO, size: int) -> PayloadText:
    """`body` (an archived file of `size` bytes) as text to show, JSON indented when whole."""
    with body:
        head = body.read(SHOWN_BYTES + 1)
    cut = len(head) > SHOWN_BYTES
    if cut:
        head = head[:SHOWN_BYTES]
    text = head.decode("utf-8", errors="replace")
    # progress.jsonl is one document a line: it stays as the lines it has.
    if not cut:
        with contextlib.suppress(orjson.JSONDecodeError):
            document = orjson.loads(head)
            text = orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
            return PayloadText(text=text, size=size, cut=cut, whole=True, document=document)
    return PayloadText(text=text, size=size, cut=cut)
