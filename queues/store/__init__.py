"""The file-system store: every task is one JSON file, its state is the directory it sits in.

Plain Python with no Django import, so it can be tested, benchmarked and swept on its own.

Where to read: store.py (QueueStore, the public face) delegates each verb to the module that
holds it: producing (post, read, fetch, wait_for_change), operating (cancel, retry), claiming
(claim, wait_claim), working (progress, finish, fail), listing (list_tasks, stats) and sweep.
They share core.py's QueueCore, the one place a record is written and logged, checked against
records.py's table of transitions. Below them: openqueues (the queues a process keeps open, each
held while a verb uses it), copies (a task's copies and its lock), posting, index (claim
candidates), files (every disk-changing call), paths, eventlog, archive, inotify.
"""

from .batch import MAX_BATCH, PostEntry, Report
from .errors import (
    CorruptRecord,
    IdempotencyKeyReused,
    InvalidItem,
    InvalidName,
    InvalidRequest,
    InvalidTransition,
    LeaseLost,
    NotCancellable,
    NotFound,
    NotRetryable,
    PayloadTooLarge,
    QueueFull,
    StorageUnavailable,
    StoreError,
)
from .eventlog import EventLog
from .paths import STATE_DIRS
from .records import STATUSES, Lease, State, Task
from .results import ANY, PostResult, QueueStats, Reported, TaskPage
from .settings import QueueSettings, StoreConfig
from .store import QueueStore, sweep_all, sweep_queue
from .sweep import SweepReport

__all__ = [
    "ANY",
    "MAX_BATCH",
    "STATE_DIRS",
    "STATUSES",
    "CorruptRecord",
    "EventLog",
    "IdempotencyKeyReused",
    "InvalidItem",
    "InvalidName",
    "InvalidRequest",
    "InvalidTransition",
    "Lease",
    "LeaseLost",
    "NotCancellable",
    "NotFound",
    "NotRetryable",
    "PayloadTooLarge",
    "PostEntry",
    "PostResult",
    "QueueFull",
    "QueueSettings",
    "QueueStats",
    "QueueStore",
    "Report",
    "Reported",
    "State",
    "StorageUnavailable",
    "StoreConfig",
    "StoreError",
    "SweepReport",
    "Task",
    "TaskPage",
    "sweep_all",
    "sweep_queue",
]
