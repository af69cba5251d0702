"""Why a pending task is not running, in one line, from what its store already knows: the API's
read (`why`), the console's task page and `taskhoster status` say the same words.

The reasons are tried in the order that holds a task back first: a paused queue takes no
claim at all; a task waiting for others is no candidate; one whose time has not come (a
retry's backoff, a post's delay) is not claimable yet; a claimable one may be held by the
queue's flow limits, or have others ahead of it. A claimable task with none ahead is what the
next claim takes: if it has been so for a while, no worker has claimed from the queue since.
"""

from __future__ import annotations

import datetime as dt
import math

from queues.store import State, Task
from queues.store.errors import StoreError
from queues.store.limits import HELD_KEY, HELD_MAX, HELD_RATE, held_reason, until_token
from queues.store.selecting import AHEAD_COUNTED
from queues.store.settings import QueueSettings
from queues.text.durations import readable_ms

from .opening import of

# A claimable task first in line this long means no worker has claimed from its queue since
# (a claim takes the first task): shorter, a worker between two claims is the likelier reason.
QUIET_MS = 60_000
DEPENDENCIES_NAMED = 2  # "waiting for a and b, and 3 more": the line stays one line


def why_pending(task: Task, settings: QueueSettings, *, now: int) -> str | None:
    """The one line for a pending task; None for a task in any other state."""
    if task.status is not State.PENDING:
        return None
    if settings.paused:
        return "The queue is paused: no worker claims from it until an operator resumes it."
    if task.waiting_for:
        return _waiting(task)
    if task.available_at > now:
        return _not_yet(task, now)
    store = of(task.host, task.queue)
    if settings.limited:
        flow = store.flow_state(task.host, task.queue, settings=settings, now=now)
        held = held_reason(flow, settings, task, now)
        if held == HELD_KEY:
            return (f"Held by its concurrency key {task.concurrency_key!r}: {settings.max_per_key} "
                    "task(s) with that key are running (the queue's maxPerKey).")  # fmt: skip
        if held == HELD_MAX:
            return (f"Held by the queue's maxProcessing: {flow.processing} of "
                    f"{settings.max_processing} are running.")  # fmt: skip
        if held == HELD_RATE and flow.tokens is not None:
            wait_ms = math.ceil(until_token(flow.tokens, settings) * 1000)
            return f"Held by the queue's rate limit: the next claim is allowed {_in(wait_ms)}."
    ahead = store.claimable_ahead(task.host, task.queue, task, now=now)
    if ahead:
        many = f"{ahead} or more" if ahead >= AHEAD_COUNTED else str(ahead)
        return f"{many} claimable task{'s' if ahead > 1 else ''} ahead of it in the queue."
    since = max(task.updated_at, task.available_at, task.released_at or 0)
    if now - since >= QUIET_MS:
        return (f"Next in line, claimable for {readable_ms(now - since)}: no worker has claimed "
                "from this queue since.")  # fmt: skip
    return "Next in line: the next claim from this queue takes it."


def _waiting(task: Task) -> str:
    refs = task.waiting_for or []
    named = [f"{ref} ({_state_of(task.host, ref)})" for ref in refs[:DEPENDENCIES_NAMED]]
    more = len(refs) - len(named)
    return (
        "Waiting for "
        + " and ".join(named)
        + (f", and {more} more," if more else "")
        + (" to finish.")
    )


def _state_of(host: str, ref: str) -> str:
    queue, _, task_id = ref.partition("/")
    try:
        return of(host, queue).read(host, queue, task_id).status.value
    except StoreError:  # gone (cleaned, deleted): its failure will not come to release this
        return "gone"


def _not_yet(task: Task, now: int) -> str:
    when = _in(task.available_at - now) + f" ({_utc(task.available_at)})"
    if task.attempts > 0 and task.last_error is not None:
        return f"In its backoff after attempt {task.attempts} failed: claimable {when}."
    return f"Delayed by its post: claimable {when}."


def _in(ms: int) -> str:
    return f"in {readable_ms(max(ms, 0))}"


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M:%S UTC")
