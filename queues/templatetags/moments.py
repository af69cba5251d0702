"""Moments as people read them: "2 min ago", "in 40 s"; the exact time goes in the title."""

from __future__ import annotations

import datetime as dt

from django import template

from queues.text.durations import readable_seconds

register = template.Library()


@register.filter
def ago(moment: int | dt.datetime | None, now_ms: int) -> str:
    """A record's millisecond time (or a datetime) relative to `now_ms`: '2 min ago',
    'in 40 s', 'just now' (within a second); empty for no time."""
    ms = int(moment.timestamp() * 1000) if isinstance(moment, dt.datetime) else moment
    if not isinstance(ms, int) or not ms:
        return ""
    delta = now_ms - ms
    if abs(delta) < 1000:
        return "just now"
    words = readable_seconds(abs(delta) // 1000)
    return f"{words} ago" if delta > 0 else f"in {words}"


@register.filter
def left(ms: int | None) -> str:
    """Time left, in milliseconds: '40 s left', or how long ago it ran out."""
    if not isinstance(ms, int):
        return ""
    if ms <= 0:
        return f"ran out {readable_seconds(-ms // 1000)} ago"
    return f"{readable_seconds(ms // 1000)} left"
