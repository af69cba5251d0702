"""A group's console page: its progress as the store counts it, and its first tasks."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import Http404

from queues import stores
from queues.models import Queue
from queues.store import GroupView, StoreError, Task

SHOWN = 50  # the tasks the page lists; the counts cover them all


@dataclass(frozen=True)
class GroupPage:
    group: GroupView
    tasks: list[Task]
    outcomes: list[tuple[str, int]]  # (outcome, count) of the ended, those with any

    @property
    def running(self) -> int:
        """Tasks posted in the group that have not ended yet."""
        return self.group.counts.posted - self.group.counts.ended

    @property
    def state_words(self) -> str:
        return self.group.state.replace("_", " ")

    @property
    def more(self) -> int:
        """How many tasks of the group the page does not list."""
        return max(self.group.counts.posted - len(self.tasks), 0)


def group_page(queue: Queue, group: str) -> GroupPage:
    """The page of one group of an operated queue; 404 for a group nobody posted to."""
    store = stores.of(queue.host.name, queue.name)
    try:
        view = store.read_group(queue.host.name, queue.name, group)
        tasks = store.group_members(queue.host.name, queue.name, group, limit=SHOWN)
    except StoreError:
        raise Http404("No such group.") from None
    outcomes = [(name, n) for name, n in view.counts.outcomes().items() if n]
    return GroupPage(group=view, tasks=tasks, outcomes=outcomes)
