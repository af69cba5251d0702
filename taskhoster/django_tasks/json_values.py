"""Whether a task's argument or return value travels through taskhoster as JSON unchanged.

`json.dumps` would turn an int dict key into a str and a tuple into a list without a word, and
the server refuses what it cannot keep exactly (an int beyond 64 bits, nesting past 64): a
value that would arrive changed, or be refused on the way, is caught here first, with where
in the value it is.
"""

from __future__ import annotations

import math
from typing import Any

# The integers the server keeps exactly (int64 and uint64).
INT_LOW, INT_HIGH = -(2**63), 2**64 - 1
# The server's nesting limit counts the whole request body; an argument sits two levels down
# in the item ({"args": [...]}) and a return value two levels down in the report
# ({"result": {"returnValue": ...}}).
MAX_DEPTH = 64 - 2


def json_problem(value: Any, where: str) -> str | None:
    """What keeps `value` (named `where`) from arriving as it is, or None when nothing does."""
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        node, path, depth = stack.pop()
        if node is None or isinstance(node, bool | str):
            continue
        if isinstance(node, int):
            if not INT_LOW <= node <= INT_HIGH:
                return f"{path} is an integer outside the 64-bit range (send it as a str)"
        elif isinstance(node, float):
            if not math.isfinite(node):
                return f"{path} is {node}, which JSON has no number for"
        elif isinstance(node, list | tuple | dict):
            if depth > MAX_DEPTH:
                return f"{path} nests deeper than {MAX_DEPTH} levels"
            if isinstance(node, dict):
                for key, child in node.items():
                    if not isinstance(key, str):
                        return f"{path} has the key {key!r}, not a str (JSON would make it one)"
                    stack.append((child, f"{path}[{key!r}]", depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(node))
        else:
            return f"{path} is of type {type(node).__name__}, not a JSON value"
    return None
