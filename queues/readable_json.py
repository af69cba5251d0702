"""JSON as a person reads it: indented, and a string of several lines (a traceback, a command's
standard error) shown as its lines, wrapped at the box's edge, instead of one JSON string with
literal \\n clipped at the right. The output is HTML for inside a <pre>, every piece escaped.

A value without such a string comes out as the JSON it is, so copying it still gives JSON.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

INDENT = 2
DEEPEST_CLASS = 6  # text blocks nested deeper share the last indentation class


def readable_json_html(value: Any) -> str:
    return _render(value, 0)


def _render(value: Any, depth: int) -> str:
    pad = " " * (INDENT * (depth + 1))
    end_pad = " " * (INDENT * depth)
    if isinstance(value, dict) and value:
        members = [f"{pad}{_scalar(str(k))}: {_render(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + end_pad + "}"
    if isinstance(value, list) and value:
        members = [pad + _render(item, depth + 1) for item in value]
        return "[\n" + ",\n".join(members) + "\n" + end_pad + "]"
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        text = value.rstrip("\n")
        # Its own block: the lines keep their own indentation, and a long one wraps inside it.
        return (
            f'<span class="json-text depth-{min(depth, DEEPEST_CLASS)}" '
            f'title="A text of {text.count(chr(10)) + 1} lines">{escape(text)}</span>'
        )
    return _scalar(value)


def _scalar(value: Any) -> str:
    return escape(json.dumps(value, ensure_ascii=False))
