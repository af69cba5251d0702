"""Flow control on a PostgreSQL queue's claims: the queue's th_flow row, locked in the claim's
transaction, holds the rate limit's bucket and makes limited claims count processing rows and
take tokens one at a time; the candidates past the tasks their key holds back.

The bucket's math and the reasons are the file store's (queues.store.limits). A claim's tokens,
its tasks and the bucket's new fill commit together or not at all, so a crash anywhere gives
no token twice and loses none."""

from __future__ import annotations

import math

from queues.store import limits
from queues.store.clock import now_ms
from queues.store.limits import HELD_KEY, HELD_MAX, HELD_RATE, FlowState
from queues.store.records import Task
from queues.store.settings import QueueSettings

from .writes import Conn


def _key_counts(conn: Conn, host: str, queue: str) -> dict[str, int]:
    found = conn.execute(
        "SELECT record->>'concurrencyKey', count(*) FROM th_tasks"
        " WHERE host = %s AND queue = %s AND status = 'processing'"
        " AND record->>'concurrencyKey' IS NOT NULL GROUP BY 1",
        (host, queue),
    ).fetchall()
    return {str(key): int(count) for key, count in found}


def _processing(conn: Conn, host: str, queue: str) -> int:
    found = conn.execute(
        "SELECT count(*) FROM th_tasks WHERE host = %s AND queue = %s AND status = 'processing'",
        (host, queue),
    ).fetchone()
    return int(found[0]) if found else 0


_BUCKET = "SELECT tokens, at FROM th_flow WHERE host = %s AND queue = %s"
_BUCKET_LOCKED = _BUCKET + " FOR UPDATE"


def _bucket(conn: Conn, host: str, queue: str, *, lock: bool) -> tuple[float, int] | None:
    found = conn.execute(_BUCKET_LOCKED if lock else _BUCKET, (host, queue)).fetchone()
    return (float(found[0]), int(found[1])) if found and found[0] is not None else None


def state(conn: Conn, host: str, queue: str, settings: QueueSettings, now: int) -> FlowState:
    """The queue's flow now, without the lock (a moment's picture)."""
    saved = _bucket(conn, host, queue, lock=False) if settings.rate_count else None
    return _state(conn, host, queue, settings, now, saved, counted=True)


def _state(
    conn: Conn,
    host: str,
    queue: str,
    settings: QueueSettings,
    now: int,
    saved: tuple[float, int] | None,
    *,
    counted: bool,
) -> FlowState:
    """The flow from the bucket's row as read (`saved`); processing/ counted when `counted`
    (a claim counts it only for its maxProcessing: a count of a deep queue's rows is dear)."""
    tokens, bucket_at = None, now
    if settings.rate_count:
        start = saved if saved is not None else (float(limits.capacity(settings)), now)
        tokens, bucket_at = limits.refilled(*start, now, settings), max(now, start[1])
    return FlowState(
        processing=_processing(conn, host, queue) if counted else 0,
        tokens=tokens,
        capacity=limits.capacity(settings),
        key_counts=_key_counts(conn, host, queue) if settings.max_per_key else {},
        bucket_at=bucket_at,
    )


class Gate:
    """One limited claim, in its transaction: the queue's row locked, its room counted."""

    def __init__(self, conn: Conn, host: str, queue: str, settings: QueueSettings, *,
                 now: int, live: bool, max_tasks: int) -> None:  # fmt: skip
        self._conn, self._host, self._queue = conn, host, queue
        # the claim's time: its tasks' attempts begin (and their `claimed` rows are stamped)
        # when the tokens were taken, not when the claim began waiting for the row's lock
        self._settings, self.now = settings, now
        self.room, self.held_by, self.retry_after = max_tasks, None, 0.0
        self.key_held = False
        if settings.rate_count and not settings.max_processing and not settings.max_per_key:
            # an empty bucket is seen without the lock: a claim in flight only empties it
            # further, so a claim held by the rate answers at once, and never queues behind
            # the lock with the other claimers that woke for the same token
            seen = _bucket(conn, host, queue, lock=False)
            tokens = limits.refilled(*seen, now, settings) if seen is not None else 1.0
            if tokens < 1:
                self.state = FlowState(processing=0, tokens=tokens,
                                       capacity=limits.capacity(settings))  # fmt: skip
                self.room, self.held_by = 0, HELD_RATE
                self.retry_after = limits.until_token(tokens, settings)
                return
        # the lock every limited claim takes first (the row made on a queue's first claim)
        saved = _bucket(conn, host, queue, lock=True)
        if saved is None:
            conn.execute(
                "INSERT INTO th_flow (host, queue) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (host, queue),
            )
            saved = _bucket(conn, host, queue, lock=True)
        if live:  # the clock once the row is held: the bucket fills while a claim waits for it
            now = self.now = now_ms(None)
        self.state = _state(conn, host, queue, settings, now, saved,
                            counted=bool(settings.max_processing))  # fmt: skip
        if settings.max_processing:
            self.room = min(self.room, settings.max_processing - self.state.processing)
            if self.room <= 0:
                self.held_by, self.retry_after = HELD_MAX, limits.RECHECK_SECONDS
        if settings.rate_count and self.room > 0:
            assert self.state.tokens is not None
            whole = math.floor(self.state.tokens)
            if whole < 1:
                self.held_by = HELD_RATE
                self.retry_after = limits.until_token(self.state.tokens, settings)
            self.room = min(self.room, whole)
        self.room = max(self.room, 0)

    def candidates(self) -> list[str]:
        """Up to `room` pending records in claim order, past those their key holds back: a
        look-up that met a key's second task (held, its key now full) looks again past it and
        the tasks already taken, until the room is filled or nothing more comes."""
        if not self.room:
            return []
        most = self._settings.max_per_key
        taken: list[str] = []
        taken_ids: list[str] = []
        while len(taken) < self.room:
            full = [k for k, n in self.state.key_counts.items() if most and n >= most]
            found = self._conn.execute(
                "SELECT record::text, record->>'concurrencyKey', id FROM th_tasks"
                " WHERE host = %s AND queue = %s AND status = 'pending' AND available_at <= %s"
                " AND (record->>'concurrencyKey' IS NULL"
                "      OR NOT (record->>'concurrencyKey' = ANY(%s)))"
                " AND NOT (id = ANY(%s))"
                " ORDER BY priority DESC, posted_at, seq LIMIT %s FOR UPDATE SKIP LOCKED",
                (self._host, self._queue, self.now, full, taken_ids, self.room - len(taken)),
            ).fetchall()
            skipped = False
            for record, key, task_id in found:
                if most and key is not None:
                    if self.state.key_counts.get(key, 0) >= most:
                        # a second of one key in this batch: its key is full now, so the next
                        # look-up leaves it out
                        self.key_held = skipped = True
                        continue
                    self.state.key_counts[key] = self.state.key_counts.get(key, 0) + 1
                taken.append(record)
                taken_ids.append(task_id)
            if not skipped:  # all it found was taken: the room is full, or nothing is left
                break
        if not taken and full:
            # held back by their keys if any such task waits
            held = self._conn.execute(
                "SELECT 1 FROM th_tasks WHERE host = %s AND queue = %s AND status = 'pending'"
                " AND available_at <= %s AND record->>'concurrencyKey' = ANY(%s) LIMIT 1",
                (self._host, self._queue, self.now, full),
            ).fetchone()
            self.key_held = self.key_held or held is not None
        return taken

    def spend(self, claimed: int) -> None:
        """The claim's tokens, taken in its transaction."""
        if not self._settings.rate_count or not claimed:
            return
        assert self.state.tokens is not None
        self._conn.execute(
            "UPDATE th_flow SET tokens = %s, at = %s WHERE host = %s AND queue = %s",
            (self.state.tokens - claimed, self.state.bucket_at, self._host, self._queue),
        )

    def answer(self, tasks: list[Task]) -> limits.Claimed:
        held_by, retry_after = self.held_by, self.retry_after
        if not tasks and held_by is None and self.key_held:
            held_by, retry_after = HELD_KEY, limits.RECHECK_SECONDS
        return limits.answer(tasks, held_by, retry_after)
