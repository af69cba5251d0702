"""The one line that says why a task failed, from its failure body: what a list has room for."""

from __future__ import annotations

import json
from typing import Any

LINE_CHARS = 160
# The fields a failure body names its reason in: taskhoster's workers write "error" (and
# "traceback"), the Django runner "exceptionClassPath"; a command's body adds "stderr".
REASON_FIELDS = ("error", "message", "reason", "stderr", "traceback", "exceptionClassPath")


def error_line(body: Any) -> str:
    """The first non-blank line of the body's reason, clipped to LINE_CHARS; "" for no body."""
    if body is None:
        return ""
    if isinstance(body, dict):
        for field in REASON_FIELDS:
            reason = body.get(field)
            if isinstance(reason, str) and reason.strip():
                return _clip(_first_line(reason))
        return _clip(json.dumps(body, ensure_ascii=False)) if body else ""
    if isinstance(body, str):
        return _clip(_first_line(body))
    return _clip(json.dumps(body, ensure_ascii=False))


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _clip(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
