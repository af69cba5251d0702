"""What the sweep learned of each done record it read, so that its next pass reads only the
done records that changed or are due.

A done task meets one rule, retention, and its record keeps its content for as long as its name
names it (every write is temp-then-rename). So the sweep keeps, per queue and per process (the
sweep loop's), each done record's stamp (stamps.py) and the two times retention counts from. A
later pass that finds the same stamp (one lstat: no open, no read, no parse) judges retention
from them; the record is read again only when its stamp changed (rewritten, replaced, edited by
hand) or its retention is over, and then the read and the lock decide, as on a first pass.

Only the times are kept, never a verdict: retention settings changed between two passes count
at the second. A process that sweeps once (cron) keeps nothing. At most LIMIT records are kept
per process, in one int each (about 150 bytes a record with its id and its place in the dict:
30 MB); the records past it are read at every pass, as before.
"""

from __future__ import annotations

import os
import threading

from . import paths, rules, stamps
from .records import Task
from .rules import retention_due
from .settings import QueueSettings

LIMIT = 200_000
_TIME_BITS = 44  # milliseconds since 1970 until the year 2527
_TIME_MASK = (1 << _TIME_BITS) - 1
_STAMP_MASK = (1 << 64) - 1  # a stamp is a hash: a signed 64-bit int


def _pack(stamp: int, finished: int, fetched: int | None) -> int:
    """One int for what is kept of a record (a tuple of three would take twice the memory);
    fetched is kept plus one, so that 0 is None."""
    kept_fetched = 0 if fetched is None else fetched + 1
    return ((stamp & _STAMP_MASK) << 2 * _TIME_BITS) | (finished << _TIME_BITS) | kept_fetched


def _unpack(packed: int) -> tuple[int, int, int | None]:
    """The stamp (masked as _pack keeps it), finished and fetched times _pack was given."""
    kept_fetched = packed & _TIME_MASK
    finished = (packed >> _TIME_BITS) & _TIME_MASK
    return packed >> 2 * _TIME_BITS, finished, kept_fetched - 1 if kept_fetched else None


class DoneRecords:
    """Per process: for each queue, its done records' stamps and retention times."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._queues: dict[tuple[str, str], dict[str, int]] = {}
        self._kept = 0
        self._lock = threading.Lock()  # two threads sweeping at once keep the count right

    def keep_only(self, host: str, queue: str, present: set[str]) -> None:
        """Forget the queue's records that are no longer in done/ (cleaned, moved back)."""
        with self._lock:
            learned = self._queues.setdefault((host, queue), {})
            gone = [task_id for task_id in learned if task_id not in present]
            for task_id in gone:
                del learned[task_id]
            self._kept -= len(gone)

    def not_due(
        self, done_fd: int, host: str, queue: str, task_id: str, settings: QueueSettings, now: int
    ) -> bool:
        """Whether the record in done/ is the one learned and its retention is not over: the
        sweep need not read it. False for anything else (not learned, changed, gone, due)."""
        learned = self._queues.get((host, queue), {}).get(task_id)
        if learned is None:
            return False
        try:
            found = os.stat(paths.task_file(task_id), dir_fd=done_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False  # gone since the listing: the read says so
        stamp, finished, fetched = _unpack(learned)
        if stamps.stamp(found) & _STAMP_MASK != stamp:
            return False
        return not retention_due(finished, fetched, settings, now)

    def retention_ends(
        self, host: str, queue: str, task_id: str, settings: QueueSettings
    ) -> int | None:
        """When the learned record's retention is over (ms), or None if it was not learned."""
        learned = self._queues.get((host, queue), {}).get(task_id)
        if learned is None:
            return None
        _stamp, finished, fetched = _unpack(learned)
        return rules.retention_ends(finished, fetched, settings)

    def learn(self, host: str, queue: str, task: Task, opened: os.stat_result | None) -> None:
        """Keep a done record the sweep read: `opened`, the fstat of the descriptor it was read
        from, stamps exactly that file."""
        stamp = -1 if opened is None else stamps.stamp(opened)
        if stamp == -1:
            return  # too young to trust (stamps.RACY_NS): read again next pass
        finished = task.finished_at if task.finished_at is not None else task.updated_at
        if not all(0 <= t < _TIME_MASK for t in (finished, task.fetched_at or 0)):
            return  # a time no store wrote (edited by hand): read at every pass
        with self._lock:
            learned = self._queues.setdefault((host, queue), {})
            if task.id not in learned:
                if self._kept >= self._limit:
                    return
                self._kept += 1
            learned[task.id] = _pack(stamp, finished, task.fetched_at)
