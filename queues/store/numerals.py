"""Numbers written as text, wherever taskhoster reads one: a query parameter, a command's
option, an environment variable, a form field. ASCII digits only. (taskhoster/numerals.py
holds the same rule for the client, which imports nothing of the server.)

Python's int() and float() also read any Unicode decimal digit ("٣" is 3, and so is the
full-width 3), "1_000", and spaces around the digits; float() reads "nan", "inf" and
"infinity" as well. None of
those is what a person writing a number for taskhoster means, and a spelling only Python
takes must not decide what a rate limit, an offset or a wait is: each is refused, saying what
was sent. An integer is an optional sign and the digits 0 to 9; a number adds a decimal part
and an exponent (`1.5`, `.5`, `2e3`).
"""

from __future__ import annotations

import argparse
import re

_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def integer(text: str) -> int | None:
    """`text` as an integer written in ASCII digits, or None when it is not one."""
    if not _INTEGER.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:  # over Python's limit on the digits of one integer
        return None


def number(text: str) -> float | None:
    """`text` as a finite number written in ASCII (digits, '.', an exponent), or None."""
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if value not in (float("inf"), float("-inf")) else None  # 1e999


def parse_integer(text: str, what: str) -> int:
    """`text` as an integer, or ValueError naming `what` and saying what was sent."""
    value = integer(text)
    if value is None:
        raise ValueError(f"{what} must be an integer in the digits 0-9, such as 30 (got {text!r}).")
    return value


def parse_number(text: str, what: str) -> float:
    """`text` as a finite number, or ValueError naming `what` and saying what was sent."""
    value = number(text)
    if value is None:
        raise ValueError(
            f"{what} must be a number in the digits 0-9, such as 30 or 0.5 (got {text!r})."
        )
    return value


def integer_option(text: str) -> int:
    """A command's integer option, as argparse's `type=` (its own int() takes "٣"): argparse
    says which option and why."""
    try:
        return parse_integer(text, "the value")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def number_option(text: str) -> float:
    """A command's number option, as argparse's `type=` (float() takes "nan" and "inf")."""
    try:
        return parse_number(text, "the value")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
