"""Control characters: refused in the names a request carries, replaced where a line is stored.

C0 (U+0000 to U+001F, tab and newline included), DEL (U+007F) and C1 (U+0080 to U+009F). None of
them belongs in a worker name, a key or a task id: PostgreSQL refuses a NUL in any text column,
a newline or an escape sequence forges lines in a log or a terminal that shows the name, and C1
codes are terminal controls too. Free JSON (an item, a progress report, a result) may hold any
of them: it is stored as the JSON text it came as, never in a text column.

Plain Python: the store's and the ingester's code import it without Django.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
REPLACEMENT = "\ufffd"


def first_control(text: str) -> int | None:
    """The position of the first control character in `text`, or None when it has none."""
    found = _CONTROL.search(text)
    return found.start() if found else None


def described(text: str, position: int) -> str:
    """The control character at `position`, as a reader can see it: "U+0000 at position 4"."""
    return f"U+{ord(text[position]):04X} at position {position}"


def replaced(text: str) -> str:
    """`text` with each control character replaced by U+FFFD, so that what is kept shows
    that something was there."""
    return _CONTROL.sub(REPLACEMENT, text)
