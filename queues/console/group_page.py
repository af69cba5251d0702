"""A group's console page: its progress as the store counts it, and its first tasks; and the
groups of a queue, listed on the queue's page."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import Http404

from queues import stores
from queues.models import Queue
from queues.store import GroupView, StoreError, Task
from queues.store.results import GROUP_OUTCOMES

SHOWN = 50  # the tasks the page lists; the counts cover them all
GROUPS_SHOWN = 20  # the groups a queue's page lists, those not called back yet first
GROUPS_READ = 200  # the names looked at to choose them (each read is one group's count)
# The bar's parts, in this order: how the ended members ended (the store's own list), then
# those still to end.
BAR_PARTS = GROUP_OUTCOMES


@dataclass(frozen=True)
class BarPart:
    outcome: str  # an outcome of GROUP_OUTCOMES, or "running"
    count: int
    percent: float  # of the bar's width


def progress_bar(group: GroupView) -> list[BarPart]:
    """The group's bar, a part per outcome with any member (a failed member shows as failed,
    not as one more done), then the members still running."""
    counts = group.counts
    whole = max(counts.posted, 1)
    outcomes = counts.outcomes()
    parts = [(name, outcomes.get(name, 0)) for name in BAR_PARTS]
    parts.append(("running", counts.posted - counts.ended))
    return [BarPart(name, n, round(100 * n / whole, 2)) for name, n in parts if n > 0]


@dataclass(frozen=True)
class GroupPage:
    group: GroupView
    tasks: list[Task]
    outcomes: list[tuple[str, int]]  # (outcome, count) of the ended, those with any

    @property
    def bar(self) -> list[BarPart]:
        return progress_bar(self.group)

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


@dataclass(frozen=True)
class GroupRow:
    group: GroupView
    bar: list[BarPart]

    @property
    def state_words(self) -> str:
        return self.group.state.replace("_", " ")


def queue_groups(queue: Queue) -> tuple[list[GroupRow], bool]:
    """The groups a queue's page lists (those not called back yet first, then by name), and
    whether it has more than it lists."""
    host, name = queue.host.name, queue.name
    store = stores.of(host, name)
    try:
        names = store.group_names(host, name, limit=GROUPS_READ + 1)
    except StoreError:  # nothing of the queue in its store yet
        return [], False
    views = []
    for group in names[:GROUPS_READ]:
        try:
            views.append(store.read_group(host, name, group))
        except StoreError:  # removed since it was listed (its callback is gone)
            continue
    views.sort(key=lambda view: (view.state == "called_back", view.group))
    rows = [GroupRow(view, progress_bar(view)) for view in views[:GROUPS_SHOWN]]
    return rows, len(names) > GROUPS_SHOWN
