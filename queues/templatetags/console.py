"""Filters for showing task records; their output is plain text, escaped by the template."""

import json
from datetime import UTC, datetime
from typing import Any

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


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
