"""Numbers as the console shows them; plain text out, escaped by the template."""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils.html import format_html

from queues.text.durations import readable_ms, readable_seconds

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


def ago(ms: int, now_ms: int) -> str:
    """How long before `now_ms`: 'just now', '2 min ago', '3 hours ago', or 'in 5 min'."""
    delta = now_ms - ms
    if abs(delta) < 5_000:
        return "just now"
    words = readable_seconds(abs(delta) // 1000).split(" ")[:2]  # the largest unit is enough
    text = " ".join(words)
    return f"{text} ago" if delta > 0 else f"in {text}"


@register.simple_tag
def moment(ms: int | None, now_ms: int) -> str:
    """A record's millisecond time as '2 min ago', the exact UTC time on hover; empty for none."""
    if not isinstance(ms, int) or not ms:
        return ""
    exact = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        exact.isoformat(timespec="milliseconds"),
        exact.strftime("%Y-%m-%d %H:%M:%S.") + f"{exact.microsecond // 1000:03d} UTC",
        ago(ms, now_ms),
    )
