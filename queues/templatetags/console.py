"""Filters for showing task records; their output is plain text, escaped by the template,
but for readable_json, which escapes each piece itself."""

import json
from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from queues.text.readable_json import readable_json_html

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@register.filter
def readable_json(value: Any) -> SafeString:
    """Indented JSON whose multi-line strings show as their lines (queues.text.readable_json)."""
    return readable_json_html(value)


@register.filter
def from_ms(value: int | None) -> str:
    """A record's millisecond timestamp as UTC time; empty for null."""
    if not value:
        return ""
    return utc_ms(datetime.fromtimestamp(value / 1000, tz=UTC))


@register.filter
def utc_ms(moment: datetime | None) -> str:
    """A moment in UTC to the millisecond (Django's date filter has no milliseconds)."""
    if moment is None:
        return ""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@register.simple_tag
def state_badge(status: str) -> SafeString:
    """A task's state as a badge: its own colour (console.css, "state badges"), and its name,
    so the colour is never the only sign."""
    return format_html('<span class="task-state task-state-{}">{}</span>', status, status)
