"""JSON as a person reads it: indented, and a string of several lines (a traceback, a command's
standard error) shown as its lines, wrapped at the box's edge, instead of one JSON string with
literal \\n clipped at the right. The output is HTML for inside a <pre>, every piece escaped.

A value without such a string comes out as the JSON it is, so copying it still gives JSON.
"""

from __future__ import annotations

import json
from typing import Any

from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.safestring import SafeString

INDENT = 2
DEEPEST_CLASS = 6  # text blocks nested deeper share the last indentation class


def readable_json_html(value: Any) -> SafeString:
    """Safe by construction: every piece goes through Django's escaping (format_html)."""
    return _render(value, 0)


def _render(value: Any, depth: int) -> SafeString:
    pad = " " * (INDENT * (depth + 1))
    end_pad = " " * (INDENT * depth)
    if isinstance(value, dict) and value:
        members = ((pad, _scalar(str(k)), _render(v, depth + 1)) for k, v in value.items())
        return format_html("{{\n{}\n{}}}", format_html_join(",\n", "{}{}: {}", members), end_pad)
    if isinstance(value, list) and value:
        items = ((pad, _render(item, depth + 1)) for item in value)
        return format_html("[\n{}\n{}]", format_html_join(",\n", "{}{}", items), end_pad)
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        text = value.rstrip("\n")
        # Its own block: the lines keep their own indentation, and a long one wraps inside it.
        return format_html(
            '<span class="json-text depth-{}" title="A text of {} lines">{}</span>',
            min(depth, DEEPEST_CLASS),
            text.count("\n") + 1,
            text,
        )
    return _scalar(value)


def _scalar(value: Any) -> SafeString:
    return conditional_escape(json.dumps(value, ensure_ascii=False))
