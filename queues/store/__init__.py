"""The file-system store: every task is one JSON file, its state is the directory it sits in.

Plain Python with no Django import, so it can be tested, benchmarked and swept on its own.

Where to read: store.py (QueueStore, the public face) delegates each verb to the module that
holds it: producing (post, read, fetch, wait_for_change), operating (cancel, retry, requeue,
delete, repost), claiming (claim, wait_claim), working (progress, finish, fail), listing
(list_tasks, stats), selecting (find, state_counts: the console's queue page) and sweep.
They share core.py's QueueCore, the one place a record is written and logged, checked against
records.py's table of transitions. Below them: openqueues (the queues a process keeps open, each
held while a verb uses it), copies (a task's copies and its lock), posting, index (claim
candidates), files (every disk-changing call), paths, eventlog, archive, inotify.
"""

from .batch import MAX_BATCH, OnComplete, PostEntry, Report
from .errors import (
    CorruptRecord,
    DependencyFailed,
    GroupClosed,
    IdempotencyKeyReused,
    InvalidItem,
    InvalidName,
    InvalidRequest,
    InvalidTransition,
    LeaseLost,
    NotArchived,
    NotCancellable,
    NotDeletable,
    NotFound,
    NotRequeueable,
    NotRetryable,
    NotWaiting,
    PayloadTooLarge,
    QueueFull,
    StorageUnavailable,
    StoreError,
)
from .eventlog import EventLog
from .paths import STATE_DIRS
from .records import STATUSES, Lease, State, Task
from .results import ANY, GroupView, PostResult, QueueStats, Reported, TaskPage
from .selecting import Found, OrderKey, Selection, StateCounts
from .settings import QueueSettings, StoreConfig
from .store import QueueStore, preview_sweep, sweep_all, sweep_queue
from .sweep import SweepReport
from .sweep_preview import SweepPreview

__all__ = [
    "ANY",
    "MAX_BATCH",
    "STATE_DIRS",
    "STATUSES",
    "CorruptRecord",
    "DependencyFailed",
    "EventLog",
    "Found",
    "GroupClosed",
    "GroupView",
    "IdempotencyKeyReused",
    "InvalidItem",
    "InvalidName",
    "InvalidRequest",
    "InvalidTransition",
    "Lease",
    "LeaseLost",
    "NotArchived",
    "NotCancellable",
    "NotDeletable",
    "NotFound",
    "NotRequeueable",
    "NotRetryable",
    "NotWaiting",
    "OnComplete",
    "OrderKey",
    "PayloadTooLarge",
    "PostEntry",
    "PostResult",
    "QueueFull",
    "QueueSettings",
    "QueueStats",
    "QueueStore",
    "Report",
    "Reported",
    "Selection",
    "State",
    "StateCounts",
    "StorageUnavailable",
    "StoreConfig",
    "StoreError",
    "SweepPreview",
    "SweepReport",
    "Task",
    "TaskPage",
    "preview_sweep",
    "sweep_all",
    "sweep_queue",
]
