"""Plain settings values: one queue's settings and the store's own. No Django here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class QueueSettings:
    """One queue's settings (store.md's table). The console's Queue model translates into this."""

    queue_seconds: int = 86400
    retain_seconds: int = 3600
    retain_from: str = "finished"  # or "fetched"
    max_retain_seconds: int = 7 * 86400  # under "fetched": an unfetched result still goes
    archive_payloads: bool = False
    lease_seconds: int = 60
    # A new queue retries a failed attempt twice (3 attempts in all); 0 = no budget (a lapsed
    # lease re-queues until the queue timeout); otherwise clamped to 1..8.
    max_attempts: int = 3
    backoff_seconds: int = 5  # first retry delay, times backoff_factor per further attempt
    backoff_factor: int = 4
    backoff_cap_seconds: int = 300
    max_item_bytes: int = 65536
    max_pending: int = 0  # 0 = unbounded
    item_schema: dict[str, Any] | None = None  # a JSON Schema every posted item must satisfy
    public_post: bool = False
    paused: bool = False
    # flow control on claims (limits.py); 0 = none
    rate_count: int = 0  # at most this many claims ...
    rate_seconds: int = 1  # ... per this many seconds, shared by every claiming process
    max_processing: int = 0  # tasks in processing at once
    max_per_key: int = 0  # tasks of one concurrencyKey in processing at once

    @property
    def limited(self) -> bool:
        """Whether any flow limit applies to this queue's claims."""
        return bool(self.rate_count or self.max_processing or self.max_per_key)

    def attempt_budget(self) -> int:
        """The effective budget: 0 for none, else maxAttempts clamped to 1..8."""
        return 0 if self.max_attempts <= 0 else min(self.max_attempts, 8)

    def backoff_ms(self, attempts: int) -> int:
        """Delay before the attempt after `attempts` failed ones."""
        seconds: int = self.backoff_seconds * self.backoff_factor ** min(max(attempts - 1, 0), 32)
        return min(seconds, self.backoff_cap_seconds) * 1000


# What the store takes off the modes of what it creates: files 0640, directories 0750 (the owner
# reads and writes; a group, e.g. the backup's, may read; no one else sees tasks or their logs)
DEFAULT_UMASK = 0o027


def parse_umask(text: str) -> int:
    """A umask written in octal (`027`, `0o077`): ValueError for anything else, or for one
    that would take the owner's own read, write or search (the store could not read back)."""
    digits = text.strip().lower().removeprefix("0o")
    if not digits or len(digits) > 4 or any(c not in "01234567" for c in digits):
        raise ValueError(f"{text!r} is not an octal umask such as 027")
    umask = int(digits, 8)
    if umask > 0o777 or umask & 0o700:
        raise ValueError(f"umask {text!r} takes the owner's own access away: use 0o0xx")
    return umask


# how durable writes are flushed (files.Flush): per file and directory, or one syncfs() of
# the file system per batch and per round of concurrent operations
FLUSH_MODES = ("fsync", "syncfs")
# the server's default (TASKHOSTER_FLUSH): the faster on the bench (bench/RESULTS.md). A
# StoreConfig made in code keeps per-file fsync unless it asks, as the store's own tests do.
DEFAULT_FLUSH = "syncfs"


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """Where the store lives and how hard it syncs."""

    items_dir: Path
    logs_dir: Path
    fsync: bool = True
    # with fsync on, how: "fsync" or "syncfs" (the server's TASKHOSTER_FLUSH), this store's own
    # (files.Flush: two stores of one process may each have their own)
    flush: str = "fsync"
    log_retain_days: int = 21
    # queues whose directories a process keeps open (six descriptors each) when nobody is
    # using them; 128 leaves room for connections under the common soft limit of 1024 files
    open_queues: int = 128
    umask: int = DEFAULT_UMASK  # taken off the modes of every file and directory it creates
