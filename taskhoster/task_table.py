"""Tasks as a table for people at a terminal: id, status, attempts, age, worker, a preview."""

from __future__ import annotations

import json
import time
from typing import Any

from .worker import failure_summary

PREVIEW_CHARS = 50
HEADER = ("ID", "STATUS", "ATTEMPTS", "AGE", "WORKER", "PREVIEW")


def age(at_ms: Any, now: float | None = None) -> str:
    """How long ago an epoch-ms time was, in the largest unit that fits: "2 min ago"."""
    if not isinstance(at_ms, int | float):
        return "-"
    seconds = max((time.time() if now is None else now) - at_ms / 1000, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def preview(task: dict[str, Any]) -> str:
    """What the task came to, or what it is doing, in a few characters."""
    status = task.get("status")
    if status == "finished":
        text = json.dumps(task.get("result"), ensure_ascii=False)
    elif status in ("failed", "cancelled"):
        text = how_it_ended(task)
    elif task.get("lastError") is not None:
        text = "last attempt: " + failure_summary(task["lastError"])
    elif task.get("progress") is not None:
        text = json.dumps(task["progress"], ensure_ascii=False)
    else:
        text = ""
    text = " ".join(text.split())  # one line
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


# The server's one-word ends said in words (the console says them alike)
END_WORDS = {
    "timeout": "the queue timeout passed",
    "dependency_failed": "a task it was to run after did not finish",
}


def how_it_ended(task: dict[str, Any]) -> str:
    """A failed or cancelled task's end: the server's reason in words ("attempts used up (3 of
    3)", not "attempts"), then the worker's own account of its last attempt."""
    error, parts = task.get("error"), []
    if error == "attempts":
        budget = task.get("maxAttempts")
        parts.append(f"attempts used up ({task.get('attempts')} of {budget})" if budget
                     else "attempts used up")  # fmt: skip
    elif error:
        parts.append(END_WORDS.get(str(error), str(error)))
    if task.get("result"):
        parts.append(failure_summary(task["result"]))
    return ": ".join(parts)


def attempts(task: dict[str, Any]) -> str:
    budget = task.get("maxAttempts")
    return f"{task.get('attempts', 0)}/{budget}" if budget else str(task.get("attempts", 0))


def table(tasks: list[dict[str, Any]], now: float | None = None) -> str:
    rows = [HEADER] + [
        (str(t.get("id")), str(t.get("status")), attempts(t), age(t.get("postedAt"), now),
         str(t.get("worker") or "-"), preview(t))  # an operator's view names the worker
        for t in tasks
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)),
                   row[-1]]).rstrip()
        for row in rows
    )  # fmt: skip
