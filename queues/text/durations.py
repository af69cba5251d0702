"""Durations in words for people: 86400 -> "1 day", 5400 -> "1 hour 30 min".

One module for the admin's seconds fields and the console's ages, so both read the same; the
dashboard's refresh gets its words from here too (its JSON rows' `words`). The one copy off the
server is queues/static/console/words.js, for a seconds field while it is typed in, held to
these words by tests/browser/test_console_browser.py.
"""

from __future__ import annotations

_UNITS = ((86_400, "day", "days"), (3_600, "hour", "hours"), (60, "min", "min"), (1, "s", "s"))


def readable_seconds(seconds: int) -> str:
    """The two largest units that are not zero (a setting is usually round; an age needs no
    more): 86400 -> '1 day', 90061 -> '1 day 1 hour', 0 -> '0 s'."""
    parts: list[str] = []
    rest = max(int(seconds), 0)
    for size, one, many in _UNITS:
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {one if count == 1 else many}")
        if len(parts) == 2:
            break
    return " ".join(parts) or "0 s"


def readable_ms(ms: int) -> str:
    """An age or a wait in milliseconds: '350 ms' below a second, else as readable_seconds."""
    if ms < 1_000:
        return f"{max(int(ms), 0)} ms"
    if ms < 10_000:
        return f"{ms / 1000:.1f} s"
    return readable_seconds(round(ms / 1000))
