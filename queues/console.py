"""What the operators' console shows and does, apart from HTTP: one function per page or action.

Views call these; these call the store with the queue's own settings. Nothing here renders.
"""

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import Http404

from queues.access import operated_queues
from queues.models import Queue
from queues.services import get_store
from queues.store import STATUSES, NotFound, QueueStats, StoreError, Task, TaskPage

User = AbstractBaseUser | AnonymousUser
EMPTY = QueueStats(pending=0, processing=0, done=0, delayed=0, retrying=0, oldest_pending_ms=0)
PAGE_SIZE = 50


@dataclass(frozen=True)
class QueueRow:
    queue: Queue
    stats: QueueStats

    def as_json(self) -> dict[str, object]:
        return {"host": self.queue.host.name, "queue": self.queue.name,
                "paused": self.queue.paused, **self.stats.__dict__}  # fmt: skip


def dashboard(user: User) -> list[QueueRow]:
    """Every queue the user operates, with its counts (zeros for a queue never posted to)."""
    store = get_store()
    rows = []
    for queue in operated_queues(user):
        try:
            stats = store.stats(queue.host.name, queue.name)
        except NotFound:
            stats = EMPTY
        rows.append(QueueRow(queue, stats))
    return rows


def operated_queue(user: User, host: str, name: str) -> Queue:
    """The queue, if the user operates it; otherwise 404, the same as for no queue at all."""
    queue = operated_queues(user).filter(host__name=host, name=name).first()
    if queue is None:
        raise Http404("No such queue.")
    return queue


def queue_tasks(queue: Queue, *, status: str | None, page: int) -> TaskPage:
    wanted = status if status in STATUSES else None
    try:
        return get_store().list_tasks(
            queue.host.name, queue.name, status=wanted,
            limit=PAGE_SIZE, offset=max(page - 1, 0) * PAGE_SIZE,
        )  # fmt: skip
    except NotFound:
        return TaskPage(count=0, tasks=[])


def task_of(queue: Queue, task_id: str) -> Task:
    try:
        return get_store().read(queue.host.name, queue.name, task_id)
    except StoreError:
        raise Http404("No such task.") from None


def act_on_task(queue: Queue, task_id: str, action: str) -> Task:
    """Cancel or retry a task as an operator; a refusal raises the store's error."""
    store = get_store()
    verb = {"cancel": store.cancel, "retry": store.retry}[action]
    return verb(queue.host.name, queue.name, task_id, settings=queue.to_settings())


def set_paused(queue: Queue, paused: bool) -> None:
    queue.paused = paused
    queue.save(update_fields=["paused", "updated_at"])
