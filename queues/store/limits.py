"""Flow control on a queue's claims, as both stores keep it: the rate limit's token bucket,
maxProcessing and maxPerKey, and the reasons a pending task is held back (the file store's gate
that holds them across processes is gate.py; the PostgreSQL store's, store_pg/limits.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .records import State, Task
from .settings import QueueSettings

HELD_RATE, HELD_MAX, HELD_KEY = "rate", "maxProcessing", "key"
HELD_REASONS = (HELD_RATE, HELD_MAX, HELD_KEY)
# A waiting claim held back by maxProcessing or a key looks again this often: what frees room
# (a task leaving processing/) is no arrival in pending/, which is all that wakes it
RECHECK_SECONDS = 0.05


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
