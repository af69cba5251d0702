"""Flow control on a queue's claims: the rate limit's token bucket, maxProcessing and maxPerKey,
the reasons a pending task is held back, and the file store's gate that holds them across every
process claiming from the queue.

The gate is an flock on the queue's own directory, opened afresh (each open its own holder, so
threads exclude each other too), held across the whole claim of a limited queue: claims then
count processing/ and take tokens one at a time, and a SIGKILL releases the lock with the
process. The bucket is one small file beside the state directories, written temp-then-rename
under the lock (a fixed temp name: only the lock's holder writes it), so a crash leaves either
the old fill or the new one. Tokens are taken before any task is renamed into processing/ and
what the claim did not use is given back after it: a crash in between loses those tokens until
the bucket refills (at most its capacity's worth of refill time), and never gives one twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from . import copies, files, paths
from .clock import now_ms
from .errors import CorruptRecord
from .paths import QueueDirs
from .records import State, Task
from .settings import QueueSettings

HELD_RATE, HELD_MAX, HELD_KEY = "rate", "maxProcessing", "key"
HELD_REASONS = (HELD_RATE, HELD_MAX, HELD_KEY)
# A waiting claim held back by maxProcessing or a key looks again this often: what frees room
# (a task leaving processing/) is no arrival in pending/, which is all that wakes it
RECHECK_SECONDS = 0.05
BUCKET_FILE, BUCKET_TEMP = "flow.json", "flow.json.tmp"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Claimed(list[Task]):
    """A limited claim's tasks, and why it took no more (held_by None: nothing held it)."""

    held_by: str | None = None
    retry_after: float = 0.0  # seconds until a token (rate), or until the next look


def answer(tasks: list[Task], held_by: str | None, retry_after: float) -> Claimed:
    claimed = Claimed(tasks)
    claimed.held_by, claimed.retry_after = held_by, retry_after
    return claimed


def recheck_in(tasks: list[Task]) -> float:
    """How long a waiting claim may sleep before it looks again: no limit unless the claim
    was held back (then until the next token, or RECHECK_SECONDS)."""
    if isinstance(tasks, Claimed) and tasks.held_by is not None and not tasks:
        return max(0.001, tasks.retry_after)
    return math.inf


# -- the token bucket ---------------------------------------------------------------------------


def capacity(settings: QueueSettings) -> int:
    """The bucket holds a tenth of the rate's count (at least one token), refilled evenly: a
    burst after a quiet spell is short, so any `seconds` long window sees at most 1.1 times
    the count, and a longer one approaches the rate itself."""
    return max(1, math.ceil(settings.rate_count / 10))


def refilled(tokens: float, at: int, now: int, settings: QueueSettings) -> float:
    """The bucket's fill at `now`, from its fill `tokens` at `at` (ms)."""
    gained = max(0, now - at) * settings.rate_count / (settings.rate_seconds * 1000)
    return min(float(capacity(settings)), tokens + gained)


def until_token(tokens: float, settings: QueueSettings) -> float:
    """Seconds until the bucket holds a whole token again."""
    missing = max(0.0, 1.0 - tokens)
    return missing * settings.rate_seconds / settings.rate_count


@dataclass(kw_only=True)
class FlowState:
    """A queue's flow at one moment: what the console shows, and what heldBy is read from."""

    processing: int
    tokens: float | None  # the bucket's fill; None without a rate limit
    capacity: int
    key_counts: dict[str, int] = field(default_factory=dict)  # processing tasks per key
    # when `tokens` is the fill: now, or the bucket's last write if that is later (a claim's
    # clock read before it waited for the lock); the bucket's time never goes back, or the
    # next claim would refill the same span twice
    bucket_at: int = 0


def held_reason(state: FlowState, settings: QueueSettings, task: Task, now: int) -> str | None:
    """Why a claimable pending task is held back now, or None (the reasons' order is the
    claim's: its key first, since a task whose key is full waits whatever the queue's room)."""
    if task.status is not State.PENDING or task.available_at > now or not settings.limited:
        return None
    key = task.concurrency_key
    if (
        settings.max_per_key
        and key is not None
        and state.key_counts.get(key, 0) >= settings.max_per_key
    ):
        return HELD_KEY
    if settings.max_processing and state.processing >= settings.max_processing:
        return HELD_MAX
    if settings.rate_count and state.tokens is not None and state.tokens < 1:
        return HELD_RATE
    return None


# -- the file store's gate ---------------------------------------------------------------------


class Gate:
    """One limited claim's room: how many it may take, which candidates are held by their
    key, and the tokens it took (`hold` is asked of each candidate before its rename)."""

    def __init__(self, qd: QueueDirs, queue_fd: int, settings: QueueSettings, *, now: int,
                 fsync: bool, max_tasks: int) -> None:  # fmt: skip
        self._qd, self._fd, self._settings = qd, queue_fd, settings
        self._now, self._fsync = now, fsync
        self.state = read_state(qd, queue_fd, settings, now)
        self.room, self.held_by, self.retry_after = max_tasks, None, 0.0
        self.reserved = 0
        self.key_held = False
        if settings.max_processing:
            self.room = min(self.room, settings.max_processing - self.state.processing)
            if self.room <= 0:
                self.held_by, self.retry_after = HELD_MAX, RECHECK_SECONDS
        if settings.rate_count and self.room > 0:
            assert self.state.tokens is not None
            whole = math.floor(self.state.tokens)
            if whole < 1:
                self.held_by = HELD_RATE
                self.retry_after = until_token(self.state.tokens, settings)
            self.room = min(self.room, whole)
        self.room = max(self.room, 0)

    def hold(self, task: Task) -> bool:
        """Whether this candidate is held back (by its key); if not, it is counted in."""
        key, most = task.concurrency_key, self._settings.max_per_key
        if most and key is not None:
            if self.state.key_counts.get(key, 0) >= most:
                self.key_held = True
                return True
            self.state.key_counts[key] = self.state.key_counts.get(key, 0) + 1
        if self._settings.rate_count and not self.reserved:
            # the claim's tokens are taken, durably, before its first rename
            assert self.state.tokens is not None
            self._save(self.state.tokens - self.room)
            self.reserved = self.room
        return False

    def settle(self, claimed: list[Task]) -> Claimed:
        """Give back the tokens the claim reserved and did not use; the claim's answer."""
        if self.reserved > len(claimed):
            assert self.state.tokens is not None
            self._save(self.state.tokens - len(claimed))
        held_by, retry_after = self.held_by, self.retry_after
        if not claimed and held_by is None and self.key_held:
            held_by, retry_after = HELD_KEY, RECHECK_SECONDS
        return answer(claimed, held_by, retry_after)

    def _save(self, tokens: float) -> None:
        data = orjson.dumps({"tokens": tokens, "at": self.state.bucket_at})
        files.rewrite_locked(self._fd, BUCKET_TEMP, BUCKET_FILE, data, fsync=self._fsync)


@contextlib.contextmanager
def gate(qd: QueueDirs, settings: QueueSettings, *, now: int, live: bool, fsync: bool,
         max_tasks: int) -> Iterator[Gate]:  # fmt: skip
    """The queue's claim lock, held while the claim runs; the gate says how far it may go."""
    fd = _queue_fd(qd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if live:  # the clock once the lock is held: the bucket fills while a claim waits for it
            now = now_ms(None)
        yield Gate(qd, fd, settings, now=now, fsync=fsync, max_tasks=max_tasks)
    finally:
        os.close(fd)  # and with it the lock


def _queue_fd(qd: QueueDirs) -> int:
    return os.open("..", _DIR_FLAGS, dir_fd=qd.fd("pending"))


def flow_state(qd: QueueDirs, settings: QueueSettings, now: int) -> FlowState:
    """The queue's flow now, read without the claim lock (a moment's picture)."""
    fd = _queue_fd(qd)
    try:
        return read_state(qd, fd, settings, now)
    finally:
        os.close(fd)


# per process, per queue: the concurrency key of each task seen in processing/ (a task's key
# never changes, so each record is read once while it is there)
_keys: dict[tuple[str, str], dict[str, str | None]] = {}


def read_state(qd: QueueDirs, queue_fd: int, settings: QueueSettings, now: int) -> FlowState:
    ids = [i for name in os.listdir(qd.fd("processing")) if (i := paths.task_id_of(name))]
    counts: dict[str, int] = {}
    if settings.max_per_key:
        known = _keys.get((qd.host, qd.queue), {})
        seen: dict[str, str | None] = {}
        for task_id in ids:
            if task_id in known:
                seen[task_id] = known[task_id]
            else:
                seen[task_id] = _key_of(qd, task_id)
            key = seen[task_id]
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        _keys[(qd.host, qd.queue)] = seen
    tokens, bucket_at = None, now
    if settings.rate_count:
        saved, at = _read_bucket(queue_fd, settings, now)
        tokens, bucket_at = refilled(saved, at, now, settings), max(now, at)
    return FlowState(processing=len(ids), tokens=tokens, capacity=capacity(settings),
                     key_counts=counts, bucket_at=bucket_at)  # fmt: skip


def _key_of(qd: QueueDirs, task_id: str) -> str | None:
    try:
        task = copies.read_copy(qd, "processing", task_id)
    except CorruptRecord:
        return None
    return task.concurrency_key if task is not None else None


def _read_bucket(queue_fd: int, settings: QueueSettings, now: int) -> tuple[float, int]:
    """The bucket's last fill and when; a queue without one yet starts full."""
    try:
        saved = orjson.loads(files.read_at(queue_fd, BUCKET_FILE))
        tokens, at = saved["tokens"], saved["at"]
        if isinstance(tokens, int | float) and isinstance(at, int) and not isinstance(at, bool):
            return float(tokens), at
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError):
        # not one of ours (written by hand): the bucket starts again, full
        pass
    return float(capacity(settings)), now
