"""The queue page's search: ids, field tests, and the messages for what cannot be read."""

import pytest

from queues.console.task_query import QueryError, parse_search
from queues.store import State, Task


def task(item=None, **fields) -> Task:
    return Task(id="0123456789abcdef", host="h.example", queue="q", status=State.PENDING,
                item=item if item is not None else {}, posted_by=None, posted_at=1, updated_at=1,
                **fields)  # fmt: skip


def matches(query: str, record: Task) -> bool:
    search = parse_search(query)
    assert search.test is not None
    return search.test(record)


def test_nothing_typed_is_no_search():
    assert parse_search("   ").empty


@pytest.mark.parametrize("text", ["3f", "3F2A", "0123456789abcdef"])
def test_hex_digits_are_an_id_prefix(text):
    search = parse_search(f" {text} ")
    assert search.id_prefix == text.lower() and search.test is None and not search.empty


def test_contains_looks_into_text_any_case_and_into_other_values_as_json():
    record = task({"url": "https://Example.com/a", "tags": ["red", "blue"], "n": 12})
    assert matches("item.url contains example.COM", record)
    assert matches('item.url contains "com/a"', record)
    assert not matches("item.url contains nowhere", record)
    assert matches("item.tags contains blue", record)
    assert matches("item.n contains 2", record)
    assert not matches("item.missing contains x", record)
    assert not matches("result contains x", record)  # null


def test_equality_takes_json_values_and_bare_words():
    record = task({"size": 3, "ok": True, "name": "bob", "user": {"roles": ["a", "b"]}})
    assert matches("item.size = 3", record) and matches("item.size == 3.0", record)
    assert not matches('item.size = "3"', record)
    assert matches("item.ok = true", record) and not matches("item.ok = 1", record)
    assert matches("item.name = bob", record) and matches('item.name="bob"', record)
    assert matches("item.user.roles.1 = b", record)
    assert matches("item.name != alice", record) and not matches("item.name != bob", record)
    assert matches("item.absent != bob", record)
    # Text that starts like an operator is searched for in quotes.
    assert matches('item.op = "= x"', task({"op": "= x"}))


def test_exists_and_the_other_roots():
    record = task({"a": None}, result={"code": 7}, error="boom", progress=[1, 2])
    assert matches("item.a exists", record) and not matches("item.b exists", record)
    assert matches("result.code = 7", record) and matches("error contains BOO", record)
    assert matches("progress.0 = 1", record) and not matches("progress.5 exists", record)
    assert not matches("item.a.b exists", record)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello world", "is not a search"),
        ("item.url", "after the field comes contains"),
        ("item.url like x", "after the field comes contains"),
        ("url contains x", "A field starts with one of item."),
        ("item..url contains x", "an empty step"),
        ("item.url contains", "needs a value"),
        ("item.url =", "needs a value"),
        ("item.url exists yes", "takes nothing after it"),
        ("item.x = " + "y" * 600, "too long"),
        ("item.user.name = = dave", "has two operators"),
        ("item.user.name == != dave", "has two operators"),
        ("item.size != =3", "has two operators"),
    ],
)
def test_a_malformed_search_says_what_is_wrong(text, message):
    with pytest.raises(QueryError, match=message):
        parse_search(text)


@pytest.mark.parametrize("step", ["\u00b2", "\u0661", "\uff11"])
def test_a_step_in_other_digits_is_a_key_not_a_list_index(step):
    """isdigit() takes these; int() refuses "²" and reads the others as numbers: no index."""
    record = task({"k": ["a", "b"], "d": {step: "x"}})
    assert not matches(f"item.k.{step} exists", record)
    assert matches(f"item.d.{step} = x", record)
