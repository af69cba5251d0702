"""The one rule for the free-form names people and programs give: a worker's name, a
concurrency key, an API token's name, a schedule's name.

A name is shown (the console, Task Logs, the CLI's tables, a terminal tailing the event log)
and compared as it is, so it holds only characters that show as themselves. Refused are the
code points `str.isprintable()` refuses, by their Unicode category: controls (Cc: C0, DEL and
C1), format characters (Cf: the bidi embeddings, overrides and isolates U+202A..U+202E and
U+2066..U+2069, the marks U+200E, U+200F and U+061C, the zero-width U+200B..U+200D and U+2060,
U+FEFF, the soft hyphen U+00AD, the tags U+E0001..U+E007F), surrogates (Cs), private use (Co),
unassigned code points and noncharacters (Cn), the line and paragraph separators (Zl, Zp) and
every space but U+0020 (Zs: U+00A0, U+3000, ...). A bidi override would reorder what the
console shows after it; a zero-width or look-alike space makes two names that read the same
and differ.

The names with a narrower rule keep it, and it is this one's subset: a host, queue or group
(`paths.py`: a-z, 0-9, '_', '-'), an Idempotency-Key (visible ASCII).
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidRequest, shown


def first_unprintable(text: str) -> int | None:
    """The position of the first code point of `text` a name may not hold, or None."""
    if text.isprintable():  # the common case, in C
        return None
    return next(n for n, char in enumerate(text) if not char.isprintable())


def described(text: str, position: int) -> str:
    """The code point at `position`, as a reader can see it: "U+202E at position 3"."""
    return f"U+{ord(text[position]):04X} at position {position}"


def refusal(what: str, text: str, position: int) -> str:
    """The one wording of the refusal, naming the field and the code point."""
    return (
        f"{what} must not hold control, format or separator characters, or spaces other "
        f"than U+0020 (got {described(text, position)})."
    )


def check_name(what: str, value: Any, *, most: int) -> str:
    """`value` as a name of 1 to `most` characters, or InvalidRequest naming `what`."""
    if not isinstance(value, str) or not 1 <= len(value) <= most:
        raise InvalidRequest(
            f"{what} must be a string of 1 to {most} characters (got {shown(value)})."
        )
    position = first_unprintable(value)
    if position is not None:
        raise InvalidRequest(refusal(what, value, position))
    return value
