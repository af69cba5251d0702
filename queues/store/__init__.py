"""The file-system store: every task is one JSON file, its state is the directory it sits in.

Plain Python with no Django import, so it can be tested, benchmarked and swept on its own.
"""

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
from .records import Lease, State, Task
from .results import ANY, PostResult, QueueStats, TaskPage
from .settings import QueueSettings, StoreConfig
from .store import QueueStore
from .sweep import SweepReport, sweep_all, sweep_queue

__all__ = [
    "ANY",
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
    "PostResult",
    "QueueFull",
    "QueueSettings",
    "QueueStats",
    "QueueStore",
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
