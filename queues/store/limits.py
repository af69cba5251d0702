"""Flow control on a queue's claims: the rate limit's token bucket, maxProcessing and maxPerKey,
the reasons a pending task is held back, and the file store's gate that holds them across every
process claiming from the queue.

The gate is an flock on `flow.json` beside the queue's state directories (and, within a process,
a thread lock beside it), held across the whole claim of a limited queue: claims then count
processing/ and take tokens one at a time, and a SIGKILL releases the lock with the process.
The file holds the bucket as one fixed-size record that the lock's holder rewrites in place
(files.write_record), so a crash leaves either the old fill or the new one. Tokens are taken
before any task is renamed into processing/ and what the claim did not use is given back after
it: a crash in between loses those tokens until the bucket refills (at most its capacity's worth
of refill time), and never gives one twice. Each process keeps the file open per queue, so a
claim pays a lock and an unlock, not an open and a close.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from . import copies, files
from .clock import now_ms
from .dircount import DirCounts
from .errors import CorruptRecord
from .paths import QueueDirs
from .records import State, Task
from .settings import QueueSettings

HELD_RATE, HELD_MAX, HELD_KEY = "rate", "maxProcessing", "key"
HELD_REASONS = (HELD_RATE, HELD_MAX, HELD_KEY)
# A waiting claim held back by maxProcessing or a key looks again this often: what frees room
# (a task leaving processing/) is no arrival in pending/, which is all that wakes it
RECHECK_SECONDS = 0.05
BUCKET_FILE = "flow.json"
RECORD_BYTES = 64  # the bucket's record, padded with spaces: its fill and when


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

    def __init__(self, qd: QueueDirs, flow_fd: int, settings: QueueSettings, *, now: int,
                 fsync: files.Durable, max_tasks: int, counts: DirCounts) -> None:  # fmt: skip
        self._qd, self._fd, self._settings = qd, flow_fd, settings
        self._now, self._fsync = now, fsync
        self.state = read_state(qd, flow_fd, settings, now, counts)
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
        data = orjson.dumps({"tokens": round(tokens, 6), "at": self.state.bucket_at})
        files.write_record(self._fd, data.ljust(RECORD_BYTES), fsync=self._fsync)


@contextlib.contextmanager
def gate(qd: QueueDirs, settings: QueueSettings, *, now: int, live: bool, fsync: files.Durable,
         max_tasks: int, counts: DirCounts) -> Iterator[Gate]:  # fmt: skip
    """The queue's claim lock, held while the claim runs; the gate says how far it may go."""
    flow = _flow_file(qd)
    with flow.lock:
        fcntl.flock(flow.fd, fcntl.LOCK_EX)
        try:
            if live:  # the clock once the lock is held: the bucket fills while a claim waits
                now = now_ms(None)
            yield Gate(qd, flow.fd, settings, now=now, fsync=fsync, max_tasks=max_tasks,
                       counts=counts)  # fmt: skip
        finally:
            fcntl.flock(flow.fd, fcntl.LOCK_UN)


@dataclass
class _Flow:
    """One queue's flow.json, open in this process (the flock is the open file's, shared by
    the process's threads: the thread lock keeps them apart)."""

    fd: int
    pid: int
    lock: threading.Lock = field(default_factory=threading.Lock)


_flows: dict[tuple[int, int], _Flow] = {}
_flows_lock = threading.Lock()


def _flow_file(qd: QueueDirs) -> _Flow:
    """The queue's flow file, opened once per process; again in a forked child (whose copy
    shares the parent's lock) and after the file was removed (the queue made anew)."""
    # by the queue directory's identity, not its name: two stores in one process (or a queue
    # made anew) are other directories
    pending = os.fstat(qd.fd("pending"))
    key = (pending.st_dev, pending.st_ino)
    with _flows_lock:
        flow = _flows.get(key)
        if flow is not None and (flow.pid != os.getpid() or os.fstat(flow.fd).st_nlink == 0):
            os.close(flow.fd)
            flow = None
        if flow is None:
            fd = files.open_record_file(qd.fd("pending"), "../" + BUCKET_FILE)
            flow = _flows[key] = _Flow(fd=fd, pid=os.getpid())
        return flow


def flow_state(qd: QueueDirs, settings: QueueSettings, now: int, counts: DirCounts) -> FlowState:
    """The queue's flow now, read without the claim lock (a moment's picture)."""
    return read_state(qd, _flow_file(qd).fd, settings, now, counts)


# per process, per queue: the concurrency key of each task seen in processing/ (a task's key
# never changes, so each record is read once while it is there)
_keys: dict[tuple[str, str], dict[str, str | None]] = {}


def read_state(
    qd: QueueDirs, flow_fd: int, settings: QueueSettings, now: int, dirs: DirCounts
) -> FlowState:
    """The processing count (and ids) from the process's DirCounts: inotify events are queued
    by the kernel within the rename that makes them, and a refresh reads all that are queued,
    so under the claim lock it counts every claim that held the lock before."""
    ids: set[str] | list[str] = []
    processing = 0
    if settings.max_per_key:
        ids = dirs.ids(qd, "processing")
        processing = len(ids)
    elif settings.max_processing:
        processing = dirs.count(qd, "processing")
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
        saved, at = _read_bucket(flow_fd, settings, now)
        tokens, bucket_at = refilled(saved, at, now, settings), max(now, at)
    return FlowState(processing=processing, tokens=tokens, capacity=capacity(settings),
                     key_counts=counts, bucket_at=bucket_at)  # fmt: skip


def _key_of(qd: QueueDirs, task_id: str) -> str | None:
    try:
        task = copies.read_copy(qd, "processing", task_id)
    except CorruptRecord:
        return None
    return task.concurrency_key if task is not None else None


def _read_bucket(flow_fd: int, settings: QueueSettings, now: int) -> tuple[float, int]:
    """The bucket's last fill and when; a queue without one yet (an empty file) starts full."""
    try:
        saved = orjson.loads(os.pread(flow_fd, RECORD_BYTES, 0))
        tokens, at = saved["tokens"], saved["at"]
        if isinstance(tokens, int | float) and isinstance(at, int) and not isinstance(at, bool):
            return float(tokens), at
    except (OSError, ValueError, KeyError, TypeError):
        # not one of ours (written by hand): the bucket starts again, full
        pass
    return float(capacity(settings)), now
