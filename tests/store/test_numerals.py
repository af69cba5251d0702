"""Numbers read from text (queues/store/numerals.py, and the client's taskhoster/numerals.py):
ASCII digits only, whatever Python's int() and float() would also take."""

from __future__ import annotations

import argparse

import pytest

from queues.store import numerals
from taskhoster import numerals as client_numerals

# what int() or float() read and no one writing a number for taskhoster means
NOT_INTEGERS = ["٣", "３", "1_000", " 7", "7 ", "+", "", "0x10", "1e3", "²", "3.0", "١٠"]  # noqa: RUF001
NOT_NUMBERS = ["٣", "٣.5", "1_000.5", " 0.5", "nan", "NaN", "inf", "-Infinity", "1e999", "", "."]


@pytest.mark.parametrize("text", NOT_INTEGERS)
def test_an_integer_in_anything_but_ascii_digits_is_refused(text):
    assert numerals.integer(text) is None
    with pytest.raises(ValueError, match=r"rate must be an integer in the digits 0-9"):
        numerals.parse_integer(text, "rate")
    for option in (numerals.integer_option, client_numerals.integer_option):
        with pytest.raises(argparse.ArgumentTypeError, match="in the digits 0-9"):
            option(text)


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_a_number_in_anything_but_ascii_digits_or_one_not_finite_is_refused(text):
    assert numerals.number(text) is None
    for option in (numerals.number_option, client_numerals.number_option):
        with pytest.raises(argparse.ArgumentTypeError, match="in the digits 0-9"):
            option(text)


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("30", 30), ("-3", -3), ("+5", 5)])
def test_ascii_integers_are_read(text, value):
    assert numerals.integer(text) == numerals.integer_option(text) == value
    assert client_numerals.integer_option(text) == value


@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), (".5", 0.5), ("2e3", 2000.0),
                                             ("5", 5.0), ("-1.5", -1.5)])  # fmt: skip
def test_ascii_numbers_are_read(text, value):
    assert numerals.number(text) == numerals.number_option(text) == value
    assert client_numerals.number_option(text) == value


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3), (" 3 ", 3), ("0", 0), ("٣", None), ("nan", None), ("3.5", None), ("-1", None),
     ("Wed, 21 Oct 2026 07:28:00 GMT", None), (None, None), ("9" * 11, None)],
)  # fmt: skip
def test_the_client_reads_retry_after_as_delay_seconds_only(header, seconds):
    assert client_numerals.retry_after_seconds(header) == seconds
