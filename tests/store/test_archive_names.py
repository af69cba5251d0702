"""The archive reads attempts out of file names: only ASCII digits are an attempt number."""

import pytest

from queues.store.archive import edit_order


@pytest.mark.parametrize(
    ("name", "attempt"),
    [
        ("2-retried.item.json", (2, 1)),
        ("2-retried-3.item.json", (2, 3)),
        ("2-retried-³.item.json", None),
        ("²-retried.item.json", None),  # str.isdigit() takes it, int() refuses it
        ("\u0661-retried.item.json", None),  # an Arabic-Indic one, which int() takes
        ("2-result.result.json", None),
        ("x-retried.item.json", None),
    ],
)
def test_only_ascii_digits_name_an_edited_items_attempt_and_order(name, attempt):
    assert edit_order(name) == attempt
