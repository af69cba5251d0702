"""What the operators' console shows and does, apart from HTTP: one function per page or action.

Views call these; these call the store with the queue's own settings. Nothing here renders.
"""

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import Http404
from django.utils.safestring import SafeString

from queues import stores
from queues.auth.access import operated_queues as operated_queues_of
from queues.console.activity import Activity, activity
from queues.console.charts import activity_chart
from queues.console.recent import Failure, recent_failures, workers_seen
from queues.models import Queue
from queues.store import InvalidItem, NotFound, QueueStats, StoreError, Task
from queues.templatetags.readable import age_ms, percent
from tasklogs.failure_lines import failure_key, failure_lines
from tasklogs.health import IngestLag, ingest_lag

User = AbstractBaseUser | AnonymousUser


@dataclass(frozen=True, kw_only=True)
class QueueRow:
    """A dashboard row: the store's counts, and the last day as Task Logs saw it."""

    queue: Queue
    stats: QueueStats | None  # None: never posted to (the store has nothing of it)
    activity: Activity
    chart: SafeString
    workers: int  # distinct workers that claimed or reported in the last 15 minutes

    @property
    def never_posted(self) -> bool:
        """Nothing of it in the store, nor in the day's events."""
        return self.stats is None and self.activity.quiet

    @property
    def oldest_pending_ms(self) -> int | None:
        """None when nothing is pending: an empty queue has no oldest task, not one of 0 ms."""
        return self.stats.oldest_pending_ms if self.stats and self.stats.pending else None

    def as_json(self) -> dict[str, object]:
        counts = self.stats.__dict__ if self.stats else EMPTY.__dict__
        return {
            "host": self.queue.host.name,
            "queue": self.queue.name,
            "paused": self.queue.paused,
            "never_posted": self.never_posted,
            **counts,
            "oldest_pending_ms": self.oldest_pending_ms,
            **self.activity.totals(),
            "ended_last_hour": self.activity.ended_last_hour,
            "failure_rate": self.activity.failure_rate,
            "workers": self.workers,
            "chart": str(self.chart),
            # the numbers as the page words them, so its refresh needs no formats of its own
            "words": {
                "oldest_pending_ms": age_ms(self.oldest_pending_ms),
                "failure_rate": percent(self.activity.failure_rate),
            },
        }


@dataclass(frozen=True, kw_only=True)
class Dashboard:
    rows: list[QueueRow]
    failures: list[Failure]  # the latest failures among these queues, newest first
    lag: IngestLag | None  # Task Logs is behind the store's log: its numbers stop at lag.oldest_t
    now_s: int


EMPTY = QueueStats(pending=0, processing=0, done=0, delayed=0, retrying=0, oldest_pending_ms=0)


def dashboard(user: User, *, now_ms: int, with_failures: bool = True) -> Dashboard:
    """Every queue the user operates: the store's counts (from the names in its directories
    and its pending index, never a task file) and aggregate queries over the ingested events.
    The refresh leaves the recent failures out: it updates the table's numbers only."""
    queues = operated_queues(user)
    now_s = now_ms // 1000
    keys = [(q.host.name, q.name) for q in queues]
    days = activity(keys, now_s=now_s)
    workers = workers_seen(keys, now_s=now_s)
    rows = []
    for queue, key in zip(queues, keys, strict=True):
        try:
            stats: QueueStats | None = stores.of(*key).stats(*key, now=now_ms)
        except NotFound:
            stats = None
        day, chart = days[key], activity_chart(days[key], label=str(queue))
        rows.append(
            QueueRow(queue=queue, stats=stats, activity=day, chart=chart, workers=workers[key])
        )
    lag = ingest_lag(Path(settings.TASKHOSTER_LOGS_DIR) / "tasks", now_s=now_s) if queues else None
    failures = recent_failures(keys) if with_failures else []
    lines = failure_lines(user, failures)
    failures = [replace(f, error_line=lines.get(failure_key(f), "")) for f in failures]
    return Dashboard(rows=rows, failures=failures, lag=lag, now_s=now_s)


def operated_queues(user: User) -> list[Queue]:
    """Every queue the user operates, with its host."""
    return list(operated_queues_of(user).select_related("host"))


def operated_queue(user: User, host: str, name: str) -> Queue:
    """The queue, if the user operates it; otherwise 404, the same as for no queue at all."""
    queue = operated_queues_of(user).filter(host__name=host, name=name).first()
    if queue is None:
        raise Http404("No such queue.")
    return queue


def task_of(queue: Queue, task_id: str) -> Task:
    try:
        return stores.of(queue.host.name, queue.name).read(queue.host.name, queue.name, task_id)
    except StoreError:
        raise Http404("No such task.") from None


# The verbs act_on_task knows, in the order the console offers them (the queue page's bulk
# actions offer each one its tab's state allows: queue_page.VALID_IN).
TASK_ACTIONS: tuple[str, ...] = ("cancel", "retry", "requeue", "hasten", "delete")


def act_on_task(queue: Queue, task_id: str, action: str, *, by: str | None = None) -> Task:
    """Cancel, retry, requeue, hasten or delete a task as the operator `by` (their name goes on the
    event line); a refusal raises the store's error. Delete returns the task as it was."""
    host, name = queue.host.name, queue.name
    store = stores.of(host, name)
    if action == "delete":
        return store.delete(host, name, task_id, by=by)
    verb = {"cancel": store.cancel, "retry": store.retry, "requeue": store.requeue,
            "hasten": store.hasten}[action]  # fmt: skip
    return verb(host, name, task_id, settings=queue.to_settings(), by=by)


def edit_and_retry(queue: Queue, task_id: str, item_text: str, *, by: str | None) -> Task:
    """Retry a failed or cancelled task with the item the operator typed (JSON text), checked
    as a post's; InvalidItem when it is not JSON, or any refusal of the store's."""
    item = parse_item(item_text)
    return stores.of(queue.host.name, queue.name).retry(
        queue.host.name, queue.name, task_id, settings=queue.to_settings(), by=by, item=item
    )


def parse_item(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidItem(f"The item is not JSON: {exc}.") from None


def repost(queue: Queue, task_id: str, *, by: str | None) -> Task:
    """A new task from the archived item of `task_id`, whether or not the store still holds it
    (NotArchived when the archive has no item of it)."""
    posted = stores.of(queue.host.name, queue.name).repost(
        queue.host.name, queue.name, task_id, settings=queue.to_settings(), by=by
    )
    return posted.task


def set_paused(queue: Queue, paused: bool) -> None:
    queue.paused = paused
    queue.save(update_fields=["paused", "updated_at"])
