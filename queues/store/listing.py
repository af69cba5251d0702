"""Reads over a whole queue: a page of its tasks, and its counts."""

from __future__ import annotations

from .clock import now_ms
from .core import QueueCore
from .records import State
from .results import ANY, QueueStats, TaskPage, _Any


def list_tasks(
    core: QueueCore,
    host: str,
    queue: str,
    *,
    status: str | None = None,
    posted_by: str | _Any | None = ANY,
    limit: int = 50,
    offset: int = 0,
) -> TaskPage:
    """Newest first by (postedAt, id); reads only the page's records (listing_index.py)."""
    wanted = State(status) if status is not None else None
    with core.queue_dirs(host, queue) as qd:
        return core.listings.page(
            qd, status=wanted, posted_by=posted_by, limit=limit, offset=offset
        )


def stats(core: QueueCore, host: str, queue: str, *, now: int | None = None) -> QueueStats:
    """Counts from the pending index and the names in processing/ and done/ (dircount.py): no
    record is read twice, a deep directory is not listed again on every call, and the pending
    counts are kept as the index changes (pending_summary.py)."""
    now = now_ms(now)
    with core.queue_dirs(host, queue) as qd:
        with core.lock:
            entries = core.index(qd).entries
            pending, waiting, oldest = len(entries), entries.waiting(now), entries.oldest()
        counts = core.dir_counts.counts(qd)
    return QueueStats(
        pending=pending,
        processing=counts["processing"],
        done=counts["done"],
        delayed=waiting.delayed,
        retrying=waiting.retrying,
        oldest_pending_ms=max(now - oldest, 0) if oldest is not None else 0,
    )
