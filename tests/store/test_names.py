"""The one rule for names (queues/store/names.py): which code points a worker's name, a
concurrency key, a token's or a schedule's name may not hold, and the refusal's wording."""

from __future__ import annotations

import pytest

from queues.store import InvalidRequest
from queues.store.names import check_name, first_unprintable

# one of each kind the rule refuses, by Unicode category
REFUSED = {
    "NUL (Cc)": "\x00",
    "newline (Cc)": "\n",
    "DEL (Cc)": "\x7f",
    "CSI, C1 (Cc)": "\x9b",
    "right-to-left override (Cf)": "\u202e",
    "left-to-right isolate (Cf)": "\u2066",
    "right-to-left mark (Cf)": "\u200f",
    "arabic letter mark (Cf)": "\u061c",
    "zero-width space (Cf)": "\u200b",
    "zero-width joiner (Cf)": "\u200d",
    "word joiner (Cf)": "\u2060",
    "byte order mark (Cf)": "\ufeff",
    "soft hyphen (Cf)": "\u00ad",
    "tag (Cf)": "\U000e0041",
    "surrogate (Cs)": "\ud800",
    "private use (Co)": "\ue000",
    "noncharacter (Cn)": "\ufffe",
    "line separator (Zl)": "\u2028",
    "paragraph separator (Zp)": "\u2029",
    "no-break space (Zs)": "\u00a0",
    "ideographic space (Zs)": "\u3000",
}


@pytest.mark.parametrize("bad", REFUSED.values(), ids=REFUSED.keys())
def test_a_name_holding_an_unprintable_code_point_is_refused_naming_it(bad):
    assert first_unprintable(f"box{bad}1") == 3
    with pytest.raises(InvalidRequest) as refused:
        check_name("worker", f"box{bad}1", most=200)
    assert refused.value.detail == (
        "worker must not hold control, format or separator characters, or spaces other than "
        f"U+0020 (got U+{ord(bad):04X} at position 3)."
    )


@pytest.mark.parametrize("name", ["box-1", "bôx 1 ✓", "e\u0301t\u00e9", "ワーカー", "x" * 200])
def test_letters_marks_symbols_and_the_space_are_taken(name):
    assert first_unprintable(name) is None
    assert check_name("worker", name, most=200) == name


@pytest.mark.parametrize("value", ["", "x" * 201, 7, None, ["a"]])
def test_a_name_of_no_characters_too_many_or_no_string_is_refused(value):
    with pytest.raises(InvalidRequest, match="worker must be a string of 1 to 200 characters"):
        check_name("worker", value, most=200)
