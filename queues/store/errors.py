"""The store's refusals. Each carries the API error code (api.md) that the HTTP layer renders."""

from __future__ import annotations


class StoreError(Exception):
    """A store error. Do not raise directly: raise one of the subclasses."""

    code = "internal"

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or (self.__doc__ or "").strip()
        super().__init__(self.detail)


class NotFound(StoreError):
    """No such task."""

    code = "not_found"


class InvalidName(StoreError):
    """Not a valid host, queue or task id."""

    code = "not_found"


class InvalidItem(StoreError):
    """The item must be a JSON object that satisfies the queue's schema."""

    code = "invalid_item"


class InvalidRequest(StoreError):
    """A field or parameter is missing or of the wrong type."""

    code = "invalid_request"


class LeaseLost(StoreError):
    """This worker and attempt do not hold the task's lease."""

    code = "lease_lost"


class NotCancellable(StoreError):
    """The task has already finished, failed or been cancelled."""

    code = "not_cancellable"


class NotRetryable(StoreError):
    """Only a failed or cancelled task can be retried."""

    code = "not_retryable"


class PayloadTooLarge(StoreError):
    """A payload is over the queue's maxItemBytes."""

    code = "payload_too_large"

    def __init__(self, which: str, size: int, limit: int) -> None:
        self.which, self.size, self.limit = which, size, limit
        super().__init__(f"The {which} is {size} bytes; this queue accepts at most {limit}.")


class IdempotencyKeyReused(StoreError):
    """This Idempotency-Key was already used with a different item."""

    code = "idempotency_key_reused"


class QueueFull(StoreError):
    """The queue holds its maximum number of pending tasks."""

    code = "queue_full"

    def __init__(self, detail: str | None = None, *, retry_after: int = 5) -> None:
        self.retry_after = retry_after
        super().__init__(detail)


class StorageUnavailable(StoreError):
    """The store could not durably write (disk full or I/O error); nothing was acknowledged."""

    code = "storage_unavailable"


class InvalidTransition(StoreError):
    """A change the store's transition table does not allow: a bug in the store, never the
    caller's fault, so it answers as an internal error. Nothing was written."""

    code = "internal"

    def __init__(self, task_id: str, source: str, target: str, event: str | None) -> None:
        self.task_id, self.source, self.target, self.event = task_id, source, target, event
        super().__init__(
            f"Task {task_id} cannot go from {source} to {target} with event {event or 'none'}."
        )


class CorruptRecord(StoreError):
    """A task file is not a valid record."""

    code = "not_found"
