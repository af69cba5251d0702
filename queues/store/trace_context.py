"""The trace context a new task carries: a W3C `traceparent` of whatever made the post.

The store knows nothing of tracing. `CURRENT` is a callable the server sets (queues/tracing.py,
when OpenTelemetry is installed and configured) that answers the current span's `traceparent`,
or None; the store stamps its answer on every task it creates (rules.new_task), so that the
worker that runs the task can link its span to the producer's. Unset, nothing is stamped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

CURRENT: list[Callable[[], str | None]] = []  # at most one
# version 00: 2 hex, trace id 32 hex (not all zero), span id 16 hex (not all zero), flags 2 hex
_TRACEPARENT = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")


def current() -> str | None:
    """The traceparent to stamp on a new task: a well-formed one, or None."""
    found = CURRENT[0]() if CURRENT else None
    return found if found is not None and _TRACEPARENT.match(found) else None
