"""Fuzz the API's JSON body parser (queues/api/parsers.py).

Contract: for any bytes, `JSONParser.parse` returns a parsed value or raises the API's documented
errors (ParseError -> 400 invalid_json, PayloadTooLarge -> 413); anything else is a crash. When it
accepts a body, Python's own json module, where it can read the body, must agree that no object
repeats a key and that nothing nests deeper than MAX_DEPTH (api.md's two extra rules), and must
read the same value, integers exactly: the parser refuses an integer outside the 64-bit range
rather than let orjson turn it into a float.
"""

from __future__ import annotations

import io
import json
import sys

import _setup

_setup.django()

import atheris  # noqa: E402

with atheris.instrument_imports(include=["queues.api.parsers"]):
    from queues.api import parsers

from rest_framework.exceptions import ParseError  # noqa: E402

from queues.store.errors import PayloadTooLarge  # noqa: E402

PARSER = parsers.JSONParser()


class Duplicate(Exception):
    pass


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise Duplicate()
    return out


def _depth(value: object) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children)
    return deepest


_PIECES = ['"', "\\", ":", ",", "{", "}", "[", "]", "a", "\\u0041", '\\"', "\u00e9", " "]


def _build(fdp: atheris.FuzzedDataProvider, depth: int) -> str:
    """A JSON-shaped document (possibly with repeated keys and colons inside strings)."""
    kind = fdp.ConsumeIntInRange(0, 5) if depth < 70 else 5
    ws = " " * fdp.ConsumeIntInRange(0, 1)
    if kind == 0:
        n = fdp.ConsumeIntInRange(0, 4)
        pairs = [f"{_string(fdp)}{ws}:{ws}{_build(fdp, depth + 1)}" for _ in range(n)]
        return "{" + ",".join(pairs) + "}"
    if kind == 1:
        return (
            "[" + ",".join(_build(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))) + "]"
        )
    if kind == 2:
        return _string(fdp)
    if kind == 3:
        return str(fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 12)))
    if kind == 4:
        return repr(fdp.ConsumeRegularFloat())
    return fdp.PickValueInList(["true", "false", "null", "0", "-0.0", "1e400", "NaN"])


def _string(fdp: atheris.FuzzedDataProvider) -> str:
    n = fdp.ConsumeIntInRange(0, 3)
    return '"' + "".join(fdp.PickValueInList(_PIECES) for _ in range(n)) + '"'


def test_one_input(data: bytes) -> None:
    if data[:1] == b"{":  # structure-aware half: the rest of the input shapes a document
        fdp = atheris.FuzzedDataProvider(data[1:])
        data = _build(fdp, 0).encode("utf-8", "surrogatepass")
    try:
        value = PARSER.parse(io.BytesIO(data), "application/json", {})
    except (ParseError, PayloadTooLarge):
        return
    try:
        reference = json.loads(data.decode("utf-8"), object_pairs_hook=_pairs)
    except Duplicate:
        raise AssertionError(f"accepted a repeated key: {data[:200]!r}") from None
    except (ValueError, RecursionError):
        return  # the reference reader cannot read it; the contract above says nothing more
    if _depth(value) > parsers.MAX_DEPTH:
        raise AssertionError(f"accepted nesting deeper than {parsers.MAX_DEPTH}")
    if reference != value:
        raise AssertionError(f"read {value!r}, Python's json reads {reference!r}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
