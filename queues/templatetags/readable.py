"""Numbers as the console shows them; plain text out, escaped by the template."""

from __future__ import annotations

import datetime as dt

from django import template

from queues.durations import readable_ms

register = template.Library()
NONE = "—"  # no value, said plainly: an empty queue has no oldest task, not one of 0 ms


@register.filter
def age_ms(value: int | None) -> str:
    return NONE if value is None else readable_ms(value)


@register.filter
def percent(share: float | None) -> str:
    if share is None:
        return NONE
    return f"{share:.0%}" if share == 0 or share >= 0.01 else "<1%"


@register.filter
def utc_clock(t: int | None) -> str:
    """Unix seconds as 'YYYY-MM-DD HH:MM UTC'; empty for no time."""
    if not isinstance(t, int):
        return ""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


@register.filter
def iso_s(t: int | None) -> str:
    """Unix seconds for a <time datetime=...> attribute; empty for no time."""
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat() if isinstance(t, int) else ""
