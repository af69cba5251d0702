"""The store's refusals. Each carries the API error code (api.md) that the HTTP layer renders."""

from __future__ import annotations

import json


class StoreError(Exception):
    """A store error. Do not raise directly: raise one of the subclasses."""

    code = "internal"
    # the entry of a batch this refusal is about (0-based), None outside a batch: the API
    # renders it beside the code, so a client knows which of its 100 entries to fix
    index: int | None = None

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or (self.__doc__ or "").strip()
        super().__init__(self.detail)

    def at(self, index: int) -> StoreError:
        """This refusal, naming the batch entry it is about."""
        self.index = index
        return self


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


def out_of_range(
    name: str,
    got: object,
    low: float,
    high: float,
    *,
    kind: str = "an integer",
    unit: str = "",
) -> InvalidRequest:
    """Every range refusal in one wording, with what was sent, e.g.
    "delay must be an integer from 0 to 86400 seconds (got -1)."."""
    unit = f" {unit}" if unit else ""
    return InvalidRequest(f"{name} must be {kind} from {low} to {high}{unit} (got {shown(got)}).")


def shown(value: object) -> str:
    """A value as the client wrote it (JSON), cut short: a refusal must not echo a megabyte."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class LeaseLost(StoreError):
    """This worker and attempt do not hold the task's lease."""

    code = "lease_lost"


class NotCancellable(StoreError):
    """The task has already finished, failed or been cancelled."""

    code = "not_cancellable"


class NotRetryable(StoreError):
    """Only a failed or cancelled task can be retried."""

    code = "not_retryable"


class DependencyFailed(StoreError):
    """A retried task runs after a task that did not finish: retry that one first."""

    code = "dependency_failed"

    def __init__(self, dependency: str, status: str | None) -> None:
        self.dependency = dependency
        how = f"it is {status}" if status is not None else "it is gone"
        then = (
            "retry it first, and this task will wait for it again."
            if status is not None
            else "this task cannot run after it any more; post it again without it."
        )
        super().__init__(f"This task runs after {dependency}, which did not finish ({how}): {then}")


class NotRequeueable(StoreError):
    """Only a task being processed (holding a lease) can be requeued."""

    code = "not_requeueable"


class NotWaiting(StoreError):
    """Only a pending task waiting out its retry's backoff or its post's delay can be hastened."""

    code = "not_waiting"


class GroupClosed(StoreError):
    """The group was closed by the post that gave its onComplete: it takes no more tasks."""

    code = "group_closed"


class NotDeletable(StoreError):
    """Only a finished, failed or cancelled task can be deleted."""

    code = "not_deletable"


class NotArchived(StoreError):
    """No archived item for this task: its queue did not archive payloads, or the log
    retention removed the archive."""

    code = "not_archived"


class PayloadTooLarge(StoreError):
    """A payload is over the queue's maxItemBytes."""

    code = "payload_too_large"

    def __init__(self, which: str, size: int, limit: int, detail: str | None = None) -> None:
        self.which, self.size, self.limit = which, size, limit
        super().__init__(
            detail
            or f"The {which} is {size} bytes, over this queue's cap of {limit} bytes "
            "(its maxItemBytes)."
        )


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
