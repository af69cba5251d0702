"""The queue page's search box: a task id (or its start), or a test on a field of the record.

    3f2a                      ids that start with 3f2a (16 hex digits: that one id)
    item.url contains foo     the item's url holds "foo" (any case)
    item.size = 3             equal to the JSON value 3 (a bare word is a string)
    item.user.name != "bob"   dotted paths go into objects; a number into a list
    result.code exists        the field is there (even if null)

A field starts with item, result, progress or error. Plain Python, no Django: the view turns a
QueryError's message into the page's error line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queues.store import Task

ROOTS = ("item", "result", "progress", "error")
OPERATORS = ("contains", "=", "==", "!=", "exists")
_ID = re.compile(r"[0-9a-fA-F]{1,16}")
_TEST = re.compile(
    r"(?P<path>[^\s=!]+)\s*(?P<op>contains\b|exists\b|==|!=|=)\s*(?P<value>.*)", re.S
)
_MISSING = object()
EXAMPLE = "a task id (or its first digits), or a field test such as item.url contains example.com"


class QueryError(ValueError):
    """The search cannot be read; the message says why, for the person who typed it."""


@dataclass(frozen=True, kw_only=True)
class Search:
    text: str = ""  # as typed, trimmed
    id_prefix: str = ""
    test: Callable[[Task], bool] | None = None

    @property
    def empty(self) -> bool:
        return not self.id_prefix and self.test is None


def parse_search(text: str) -> Search:
    text = text.strip()
    if not text:
        return Search()
    if _ID.fullmatch(text):
        return Search(text=text, id_prefix=text.lower())
    if len(text) > 500:
        raise QueryError("The search is too long (500 characters at most).")
    found = _TEST.fullmatch(text)
    if found is None:
        if text.split(".")[0] in ROOTS:
            raise QueryError(
                f"“{_short(text)}”: after the field comes contains, =, != or exists, "
                "as in item.url contains example.com."
            )
        raise QueryError(f"“{_short(text)}” is not a search: type {EXAMPLE}.")
    path, op, raw = found["path"], found["op"], found["value"].strip()
    steps = _path(path)
    if op == "exists":
        if raw:
            raise QueryError(f"“{path} exists” takes nothing after it.")
        return Search(text=text, test=_exists(steps))
    if not raw:
        raise QueryError(f"“{path} {op}” needs a value to compare with.")
    if op == "contains":
        return Search(text=text, test=_contains(steps, _as_text(raw).casefold()))
    if op != "contains" and raw[0] in "=!":
        # `item.user.name = = dave` would compare with the text "= dave" and match nothing.
        raise QueryError(
            f"“{_short(text)}” has two operators: one of =, != between the field and the value "
            f"(to look for text that starts with {raw[0]}, put it in quotes: {path} {op} "
            f'"{_short(raw)}").'
        )
    value = _as_value(raw)
    equal = _equals(steps, value)
    return Search(text=text, test=equal if op != "!=" else lambda task: not equal(task))


def _path(path: str) -> list[str]:
    steps = path.split(".")
    if steps[0] not in ROOTS:
        roots = ", ".join(f"{r}." for r in ROOTS)
        raise QueryError(f"A field starts with one of {roots} “{_short(path)}” does not.")
    if any(not step for step in steps):
        raise QueryError(f"“{_short(path)}” has an empty step between its dots.")
    return steps


def _as_value(raw: str) -> Any:
    """A JSON value when it reads as one (3, true, null, "quoted"), else the bare text."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _as_text(raw: str) -> str:
    value = _as_value(raw)
    return value if isinstance(value, str) else raw


def field(task: Task, steps: list[str]) -> Any:
    """The value at a dotted path of the record, or _MISSING."""
    value: Any = {"item": task.item, "result": task.result, "progress": task.progress,
                  "error": task.error}[steps[0]]  # fmt: skip
    for step in steps[1:]:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and _is_index(step) and int(step) < len(value):
            value = value[int(step)]
        else:
            return _MISSING
    return value


def _is_index(step: str) -> bool:
    """Whether a step reads as a list index: ASCII digits only (isdigit() alone takes "²",
    which int() refuses)."""
    return step.isascii() and step.isdigit()


def _exists(steps: list[str]) -> Callable[[Task], bool]:
    return lambda task: field(task, steps) is not _MISSING


def _contains(steps: list[str], needle: str) -> Callable[[Task], bool]:
    def test(task: Task) -> bool:
        value = field(task, steps)
        if value is _MISSING or value is None:
            return False
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return needle in text.casefold()

    return test


def _equals(steps: list[str], wanted: Any) -> Callable[[Task], bool]:
    def test(task: Task) -> bool:
        value = field(task, steps)
        if _is_number(value) and _is_number(wanted):
            return bool(value == wanted)  # 3 = 3.0, as JSON has one kind of number
        # otherwise the same JSON type and value: true is not 1 (Python's bool is an int)
        return value is not _MISSING and type(value) is type(wanted) and value == wanted

    return test


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "…"
