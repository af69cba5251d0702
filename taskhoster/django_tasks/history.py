"""A Django task's attempts as its reports carry them: when the first and the latest attempt
started, which worker ran each, and each failed attempt's error.

The status view keeps only the task's last body (`result`, or `lastError` for a retried one)
and not the lease's worker, so each report of the runner carries the history so far, and the
next attempt's runner takes it up from the claimed record's `lastError`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

# a worker that left no report of its attempt (its lease lapsed, or an older runner)
UNKNOWN_WORKER = "unknown"
TRACEBACK_CHARS = 4000  # the newest error's traceback keeps this much of its end
# Earlier errors share this much (each at least EARLIER_MIN_CHARS), so that a task with many
# attempts still reports under the queue's item cap.
EARLIER_TRACEBACK_CHARS = 12000
EARLIER_MIN_CHARS = 200


@dataclass(frozen=True)
class History:
    started_at: int | None = None  # ms: the first attempt's start
    last_attempted_at: int | None = None  # ms: the latest attempt's start
    worker_ids: list[str] = field(default_factory=list)  # one per attempt
    errors: list[dict[str, str]] = field(default_factory=list)  # exceptionClassPath, traceback

    def as_body(self) -> dict[str, Any]:
        # The times as ISO 8601 (UTC, milliseconds): the body is shown to people on the
        # console's task page, where epoch milliseconds read as a bare number.
        return {
            "startedAt": _iso(self.started_at),
            "lastAttemptedAt": _iso(self.last_attempted_at),
            "workerIds": self.worker_ids,
            "errors": self.errors,
        }

    def failed(self, class_path: str, traceback: str) -> History:
        """This history with the latest attempt's error added (earlier ones clipped)."""
        earlier = EARLIER_TRACEBACK_CHARS // max(len(self.errors), 1)
        keep = max(earlier, EARLIER_MIN_CHARS)
        clipped = [{**e, "traceback": _tail(e.get("traceback", ""), keep)} for e in self.errors]
        newest = {"exceptionClassPath": class_path, "traceback": _tail(traceback, TRACEBACK_CHARS)}
        return History(self.started_at, self.last_attempted_at, self.worker_ids,
                       [*clipped, newest])  # fmt: skip


def of_body(body: Any) -> History | None:
    """The history a report's body carries; None for a body without one."""
    if not isinstance(body, dict) or not isinstance(body.get("workerIds"), list):
        return None
    errors = body.get("errors")
    return History(
        started_at=_ms(body.get("startedAt")),
        last_attempted_at=_ms(body.get("lastAttemptedAt")),
        worker_ids=[str(w) for w in body["workerIds"]],
        errors=[
            {
                "exceptionClassPath": str(e["exceptionClassPath"]),
                "traceback": str(e.get("traceback", "")),
            }
            for e in (errors if isinstance(errors, list) else [])
            if isinstance(e, dict) and e.get("exceptionClassPath")
        ],
    )


def of_attempt(record: dict[str, Any], worker: str) -> History:
    """The history of a claimed record's attempt, now starting: the earlier attempts' (from
    `lastError`) with this one's start and worker added. The claim set `updatedAt`."""
    earlier = of_body(record.get("lastError")) or _without_history(record.get("lastError"))
    attempt = int(record.get("attempts") or 1)
    workers = earlier.worker_ids[: attempt - 1]
    workers += [UNKNOWN_WORKER] * (attempt - 1 - len(workers))
    now = _ms(record.get("updatedAt"))
    return History(
        started_at=earlier.started_at if earlier.started_at is not None else now,
        last_attempted_at=now,
        worker_ids=[*workers, worker],
        errors=earlier.errors,
    )


def of_view(view: dict[str, Any]) -> History:
    """What a status view says of the attempts: the history of its latest report (the result
    of an ended task, the running attempt's progress, a retried attempt's lastError).

    A task ended without a report of the runner's (a timeout, a budget spent by lapsed
    leases, a cancel before it ran) has the history of its last retried attempt."""
    status = view.get("status")
    bodies = [view.get("result")] if status in ("finished", "failed", "cancelled") else []
    if status == "processing":
        bodies.append(view.get("progress"))
    bodies.append(view.get("lastError"))
    found = next((h for h in map(of_body, bodies) if h is not None), None)
    return found if found is not None else _without_history(*reversed(bodies))


def _without_history(*bodies: Any) -> History:
    """A body written before reports carried a history: its own error only."""
    return History(
        errors=[
            {
                "exceptionClassPath": str(b["exceptionClassPath"]),
                "traceback": str(b.get("traceback", "")),
            }
            for b in bodies
            if isinstance(b, dict) and b.get("exceptionClassPath")
        ]
    )


def _ms(value: Any) -> int | None:
    """Epoch milliseconds of a body's time: ISO 8601 as as_body writes it, or the epoch
    milliseconds bodies carried before (and the record's own updatedAt)."""
    if isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
        if when.tzinfo is None:
            return None
        return round(when.timestamp() * 1000)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    second = dt.datetime.fromtimestamp(ms // 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{second}.{ms % 1000:03d}Z"


def _tail(text: str, most: int) -> str:
    return text if len(text) <= most else "..." + text[-(most - 3) :]
