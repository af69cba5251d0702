"""Numbers the client reads from text: a command-line option and a `Retry-After` header, in
ASCII digits only (the server's rule, queues/store/numerals.py; the client imports nothing of
the server).

int() and float() also read "٣", "1_000", " 7 ", "nan" and "inf": a `Retry-After: nan` would
make time.sleep() raise, and `--lease ٣` would be a lease no one meant.
"""

from __future__ import annotations

import argparse
import re

_INTEGER = re.compile(r"[+-]?[0-9]+")
# RFC 9110's delay-seconds: 1*DIGIT
_DELAY_SECONDS = re.compile(r"[0-9]+")


def integer_option(text: str) -> int:
    """A command-line integer, as argparse's `type=`: the digits 0-9 with an optional sign."""
    if _INTEGER.fullmatch(text):
        try:
            return int(text)
        except ValueError:  # past Python's limit on an integer's digits
            pass
    raise argparse.ArgumentTypeError(
        f"the value must be an integer in the digits 0-9, such as 30 (got {text!r})."
    )


def retry_after_seconds(value: str | None) -> int | None:
    """A `Retry-After` header's delay in seconds, or None when it gives none the client reads
    (no header, an HTTP date, which taskhoster never sends, or anything else)."""
    if value is None:
        return None
    value = value.strip(" \t")  # the header's optional whitespace, which HTTP allows
    if not _DELAY_SECONDS.fullmatch(value) or len(value) > 10:
        return None
    return int(value)


_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def number_option(text: str) -> float:
    """A command-line number, as argparse's `type=`: ASCII digits, a decimal part, an exponent
    (float() would also take "nan" and "inf")."""
    value = float(text) if _NUMBER.fullmatch(text) else None
    if value is None or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(
            f"the value must be a number in the digits 0-9, such as 10 or 0.5 (got {text!r})."
        )
    return value
