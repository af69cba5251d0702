"""The file store's flow gate: the lock that holds a limited queue's claims to its limits across
every process claiming from it.

The gate is an flock on `flow.json` beside the queue's state directories (and, within a process,
a thread lock beside it), held across the whole claim of a limited queue: claims then count
processing/ and take tokens one at a time, and a SIGKILL releases the lock with the process.
The file holds the bucket as one fixed-size record that the lock's holder rewrites in place
(files.write_record), so a crash leaves either the old fill or the new one. Tokens are taken
before any task is renamed into processing/ and what the claim did not use is given back after
it: a crash in between loses those tokens until the bucket refills (at most its capacity's worth
of refill time), and never gives one twice.

What a claim pays for the gate is kept small (issue 27: within 10% of an unlimited claim): the
file stays open with the queue's directories (QueueDirs.attached), processing/'s count comes from
the process's inotify-kept names (dircount.py), and its keys are kept per id, updated by what
changed since the last claim: a record is read only for a task another process claimed, and only
once while it is there.
"""

from __future__ import annotations

import fcntl
import math
import os
import threading

import orjson

from . import copies, files, strays
from .clock import now_ms
from .dircount import DirCounts
from .errors import CorruptRecord
from .limits import (
    HELD_KEY,
    HELD_MAX,
    HELD_RATE,
    RECHECK_SECONDS,
    Claimed,
    FlowState,
    answer,
    capacity,
    refilled,
    until_token,
)
from .paths import QueueDirs
from .records import Task
from .settings import QueueSettings

BUCKET_FILE = "flow.json"
RECORD_BYTES = 64  # the bucket's record, padded with spaces: its fill and when
_ATTACHED = "flow"

# the process's id, kept without a getpid() per claim: a forked child's copy of a flow file
# shares the parent's lock (an flock is the open file's), so the child opens its own
_pid = os.getpid()


def _new_pid_in_child() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_new_pid_in_child)
_opening = threading.Lock()


class Flow:
    """One queue's flow.json, open in this process, and what its gate keeps between claims:
    the key of each task seen in processing/ (a task's key never changes) and their counts."""

    def __init__(self, qd: QueueDirs) -> None:
        self.pid = _pid
        self.fd = _open_flow(qd)
        self.lock = threading.Lock()  # the flock is the open file's, shared by the threads
        self.keys: dict[str, str | None] = {}
        self.key_counts: dict[str, int] = {}
        self.epoch, self.seen = -1, 0  # how far into processing/'s changes `keys` goes

    def close(self) -> None:
        if self.pid == _pid:  # a forked child's copy is the parent's: never closed for it
            os.close(self.fd)

    def count_keys(self, qd: QueueDirs, dirs: DirCounts) -> tuple[int, bool]:
        """processing/'s count now, with `key_counts` brought up to it (hold `lock`), and
        whether the process's inotify queue was read for it."""
        now = dirs.since(qd, "processing", self.epoch, self.seen)
        if now.changes is None:  # the first look, or changes no longer kept: every id
            assert now.ids is not None
            self.keys = {i: self.keys[i] if i in self.keys else _key_of(qd, i) for i in now.ids}
            self.key_counts = {}
            for key in self.keys.values():
                if key is not None:
                    self.key_counts[key] = self.key_counts.get(key, 0) + 1
        else:
            for task_id, present in now.changes:
                self._change(qd, task_id, present)
        self.epoch, self.seen = now.epoch, now.end
        return now.total, now.read

    def _change(self, qd: QueueDirs, task_id: str, present: bool) -> None:
        # each change is applied once, whatever its order with the claim's own `claimed_key`
        # (which comes before its rename's event is drained)
        if present:
            if task_id not in self.keys:
                self.claimed_key(task_id, _key_of(qd, task_id))
        elif task_id in self.keys:
            key = self.keys.pop(task_id)
            if key is not None:
                left = self.key_counts[key] - 1
                if left:
                    self.key_counts[key] = left
                else:
                    del self.key_counts[key]

    def claimed_key(self, task_id: str, key: str | None) -> None:
        """A task now in processing/ and its key (this process's own claim: no read)."""
        self.keys[task_id] = key
        if key is not None:
            self.key_counts[key] = self.key_counts.get(key, 0) + 1


class Gate:
    """One limited claim's room: how many it may take, which candidates are held by their
    key, and the tokens it took (`hold` is asked of each candidate before its rename)."""

    def __init__(self, qd: QueueDirs, flow: Flow, settings: QueueSettings, *, now: int,
                 fsync: files.Durable, max_tasks: int, counts: DirCounts) -> None:  # fmt: skip
        self._flow, self._settings, self._fsync = flow, settings, fsync
        # the claim's time: its tasks' attempts begin (and their `claimed` lines are stamped)
        # when the tokens were taken, not when the claim began waiting for the lock, or a
        # window of the log would hold more than the bucket let through in it
        self.now = now
        # the flow's own key counts, not a copy: the claim adds its own beside them (_mine)
        self.state, self.log_read = _read(qd, flow, settings, now, counts, copy_keys=False)
        self.room, self.held_by, self.retry_after = max_tasks, None, 0.0
        self.reserved = 0
        self.key_held = False
        self._mine: dict[str, int] = {}  # the candidates this claim let through, per key
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
            mine = self._mine.get(key, 0)
            if self.state.key_counts.get(key, 0) + mine >= most:
                self.key_held = True
                return True
            self._mine[key] = mine + 1
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
        if self._settings.max_per_key:
            for task in claimed:  # known now, before their renames' events are drained
                self._flow.claimed_key(task.id, task.concurrency_key)
        held_by, retry_after = self.held_by, self.retry_after
        if not claimed and held_by is None and self.key_held:
            held_by, retry_after = HELD_KEY, RECHECK_SECONDS
        return answer(claimed, held_by, retry_after)

    def _save(self, tokens: float) -> None:
        data = orjson.dumps({"tokens": round(tokens, 6), "at": self.state.bucket_at})
        files.write_record(self._flow.fd, data.ljust(RECORD_BYTES), fsync=self._fsync)


class ClaimLock:
    """The queue's claim lock, held while the claim runs; the gate says how far it may go.
    A class rather than a generator: entered on every limited claim, it costs less."""

    def __init__(self, qd: QueueDirs, settings: QueueSettings, *, now: int, live: bool,
                 fsync: files.Durable, max_tasks: int, counts: DirCounts) -> None:  # fmt: skip
        self._qd, self._settings, self._now, self._live = qd, settings, now, live
        self._fsync, self._max_tasks, self._counts = fsync, max_tasks, counts
        self._flow = _flow_of(qd)

    def __enter__(self) -> Gate:
        flow = self._flow
        flow.lock.acquire()
        try:
            fcntl.flock(flow.fd, fcntl.LOCK_EX)
        except BaseException:
            flow.lock.release()
            raise
        try:
            # the clock once the lock is held: the bucket fills while a claim waits
            now = now_ms(None) if self._live else self._now
            return Gate(self._qd, flow, self._settings, now=now, fsync=self._fsync,
                        max_tasks=self._max_tasks, counts=self._counts)  # fmt: skip
        except BaseException:
            self._release()
            raise

    def __exit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        try:
            fcntl.flock(self._flow.fd, fcntl.LOCK_UN)
        finally:
            self._flow.lock.release()


def _open_flow(qd: QueueDirs) -> int:
    """The queue's flow.json, open; anything else planted in its place (a symlink, a FIFO, a
    directory) is moved aside first (strays.py), and the new file is a full bucket."""
    try:
        return files.open_record_file(qd.fd("pending"), "../" + BUCKET_FILE)
    except OSError as exc:
        if not strays.is_stray(exc):
            raise
    queue_fd = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=qd.fd("pending"))
    try:
        strays.move_aside(qd, queue_fd, BUCKET_FILE, "")
    finally:
        os.close(queue_fd)
    return files.open_record_file(qd.fd("pending"), "../" + BUCKET_FILE)


def _flow_of(qd: QueueDirs) -> Flow:
    """The queue's flow file, opened once with its directories (two stores in one process, or
    a queue opened anew, have their own); again in a forked child."""
    flow = qd.attached.get(_ATTACHED)
    if isinstance(flow, Flow) and flow.pid == _pid:
        return flow
    with _opening:  # two threads' first claims open one file, with one thread lock
        flow = qd.attached.get(_ATTACHED)
        if not isinstance(flow, Flow) or flow.pid != _pid:
            if isinstance(flow, Flow):  # the forked child's copy of the parent's: let go of it
                os.close(flow.fd)
            flow = Flow(qd)
            qd.attached[_ATTACHED] = flow
        return flow


def flow_state(qd: QueueDirs, settings: QueueSettings, now: int, counts: DirCounts) -> FlowState:
    """The queue's flow now, read without the claim lock (a moment's picture)."""
    flow = _flow_of(qd)
    with flow.lock:  # the keys it keeps are changed by this process's claims
        return read_state(qd, flow, settings, now, counts)


def read_state(
    qd: QueueDirs, flow: Flow, settings: QueueSettings, now: int, dirs: DirCounts
) -> FlowState:
    """The processing count (and keys) from the process's DirCounts: inotify events are queued
    by the kernel within the rename that makes them, and a refresh reads all that are queued,
    so under the claim lock it counts every claim that held the lock before."""
    return _read(qd, flow, settings, now, dirs, copy_keys=True)[0]


def _read(
    qd: QueueDirs,
    flow: Flow,
    settings: QueueSettings,
    now: int,
    dirs: DirCounts,
    *,
    copy_keys: bool,
) -> tuple[FlowState, bool]:
    """read_state(), and whether the process's inotify queue was read for it (then the claim's
    pending index need not read it again)."""
    processing, read = 0, False
    counts: dict[str, int] = {}
    if settings.max_per_key:
        processing, read = flow.count_keys(qd, dirs)
        counts = dict(flow.key_counts) if copy_keys else flow.key_counts
    elif settings.max_processing:
        processing, read = dirs.counted(qd, "processing")
    tokens, bucket_at = None, now
    if settings.rate_count:
        saved, at = _read_bucket(flow.fd, settings, now)
        tokens, bucket_at = refilled(saved, at, now, settings), max(now, at)
    state = FlowState(processing=processing, tokens=tokens, capacity=capacity(settings),
                      key_counts=counts, bucket_at=bucket_at)  # fmt: skip
    return state, read


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
