"""What the console's queue page shows, apart from HTTP: the filter its query string asks for, the
counts per state, one page of tasks with their previews, and the queue's settings in words.

Counts and pages come from the store's listing index (a page reads the records it shows); a
field search reads records too, at most SCAN_BUDGET per request, and pages on by cursor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from queues import stores
from queues.console.task_query import QueryError, Search, parse_search
from queues.models import Queue
from queues.store import STATUSES, NotFound, OrderKey, Selection, State, StateCounts, Task
from queues.store.error_line import error_line
from queues.text.durations import readable_seconds
from queues.text.failure_words import end_in_words

PAGE_SIZE = 50
SCAN_BUDGET = 2_000  # records a field search reads per request before it offers to go on
PREVIEW_CHARS = 200  # a failure's words and its reason's line (160) whole; the CSS cuts to the box
# Which states each operator verb applies to: a tab shows only the ones its state allows.
VALID_IN: dict[str, frozenset[State]] = {
    "cancel": frozenset({State.PENDING, State.PROCESSING}),
    "retry": frozenset({State.FAILED, State.CANCELLED}),
    "requeue": frozenset({State.PROCESSING}),
    "delete": frozenset({State.FINISHED, State.FAILED, State.CANCELLED}),
}


@dataclass(frozen=True, kw_only=True)
class Filter:
    """The tasks an operator is looking at (and a bulk action applies to)."""

    status: State | None = None
    search: Search = field(default_factory=Search)
    newest_first: bool = True

    @classmethod
    def from_query(cls, query: QueryDict) -> tuple[Filter, str | None]:
        """The filter, and the search's error message (the page then lists nothing)."""
        raw_status = query.get("status", "")
        status = State(raw_status) if raw_status in STATUSES else None
        newest_first = query.get("order") != "oldest"
        try:
            search, error = parse_search(query.get("q", "")), None
        except QueryError as exc:
            search, error = Search(text=query.get("q", "").strip()), str(exc)
        return cls(status=status, search=search, newest_first=newest_first), error

    def selection(self) -> Selection:
        return Selection(status=self.status, id_prefix=self.search.id_prefix,
                         test=self.search.test)  # fmt: skip

    def query(self, **changes: str) -> str:
        """This filter as a query string, with `changes` (an empty value drops the key)."""
        params = QueryDict(mutable=True)
        wanted = {"status": self.status.value if self.status else "", "q": self.search.text,
                  "order": "" if self.newest_first else "oldest", **changes}  # fmt: skip
        for name, value in wanted.items():
            if value:
                params[name] = value
        return params.urlencode()


@dataclass(frozen=True, kw_only=True)
class Row:
    task: Task
    preview: str
    worker: str


@dataclass(frozen=True, kw_only=True)
class TaskList:
    rows: list[Row]
    count: int | None  # None for a field search: only reading every record would tell
    page: int
    last_page: int
    next_after: OrderKey | None  # a field search's cursor to the next page
    read: int  # records read for this page


@dataclass(frozen=True, kw_only=True)
class QueuePage:
    queue: Queue
    filter: Filter
    error: str | None
    counts: StateCounts | None  # None: the store has nothing of the queue yet
    tasks: TaskList
    actions: list[str]  # the verbs this tab's tasks allow, of those the console offers

    @property
    def more_query(self) -> str:
        """A field search's next page: the same filter from its cursor."""
        return self.filter.query(after=cursor_text(self.tasks.next_after))

    @property
    def clear_query(self) -> str:
        return self.filter.query(q="")

    def page_query(self, page: int) -> str:
        return self.filter.query(page=str(page) if page > 1 else "")

    @property
    def previous_query(self) -> str:
        return self.page_query(self.tasks.page - 1)

    @property
    def next_query(self) -> str:
        return self.page_query(self.tasks.page + 1)

    @property
    def tabs(self) -> list[Tab]:
        """'all', then one tab per state; each keeps the search and the order."""
        counts = self.counts
        total = sum(counts.of(s) for s in State) if counts else 0
        tabs = [Tab(label="all", count=total, query=self.filter.query(status=""),
                    current=self.filter.status is None)]  # fmt: skip
        for state in State:
            note = ""
            if state is State.PENDING and counts and (counts.delayed or counts.retrying):
                parts = [f"{counts.delayed} delayed"] if counts.delayed else []
                parts += [f"{counts.retrying} waiting to retry"] if counts.retrying else []
                note = " · ".join(parts)
            tabs.append(Tab(label=state.value, count=counts.of(state) if counts else 0,
                            note=note, query=self.filter.query(status=state.value),
                            current=self.filter.status is state))  # fmt: skip
        return tabs


@dataclass(frozen=True, kw_only=True)
class Tab:
    label: str
    count: int
    query: str
    current: bool
    note: str = ""  # pending: how many wait for their time or a retry


def queue_page(
    queue: Queue, query: QueryDict, *, known_actions: tuple[str, ...], now_ms: int
) -> QueuePage:
    found, error = Filter.from_query(query)
    nothing = TaskList(rows=[], count=0, page=1, last_page=1, next_after=None, read=0)
    try:
        store = stores.of(queue.host.name, queue.name)
        counts: StateCounts | None = store.state_counts(queue.host.name, queue.name, now=now_ms)
        # A search that cannot be read shows no task and offers no action: "all matching"
        # must never quietly mean every task of the tab.
        tasks = nothing if error else task_list(
            queue, found, page=_number(query.get("page")), after=query.get("after"))  # fmt: skip
    except NotFound:
        counts, tasks = None, nothing
    actions = [] if error else actions_for(found.status, known_actions, counts)
    return QueuePage(queue=queue, filter=found, error=error, counts=counts, tasks=tasks,
                     actions=actions)  # fmt: skip


def actions_for(
    status: State | None, known: tuple[str, ...], counts: StateCounts | None
) -> list[str]:
    """A state's tab: the verbs its state allows. 'all': those some task here would allow."""
    if status is not None:
        return [a for a in known if status in VALID_IN.get(a, frozenset())]
    return [a for a in known if counts and any(counts.of(s) for s in VALID_IN.get(a, ()))]


def task_list(queue: Queue, found: Filter, *, page: int, after: str | None) -> TaskList:
    """A page by number, or for a field search from its cursor (`after`)."""
    cursor = parse_cursor(after) if found.search.test else None
    result = stores.of(queue.host.name, queue.name).find(
        queue.host.name, queue.name, found.selection(), newest_first=found.newest_first,
        limit=PAGE_SIZE, offset=0 if found.search.test else (page - 1) * PAGE_SIZE,
        after=cursor, budget=SCAN_BUDGET,
    )  # fmt: skip
    last = max(((result.count or 0) + PAGE_SIZE - 1) // PAGE_SIZE, 1)
    return TaskList(rows=[row(t) for t in result.tasks], count=result.count, page=page,
                    last_page=last, next_after=result.next_after, read=result.read)  # fmt: skip


def row(task: Task) -> Row:
    worker = task.lease.worker if task.lease else (task.ended_by or "")
    return Row(task=task, preview=preview(task), worker=worker)


def preview(task: Task) -> str:
    """What tells tasks apart at a glance: a failure's error code and body, a retry's last
    error, else the item; cut short."""
    if task.status is State.FAILED and (task.error is not None or task.result is not None):
        parts = [_end(task)] if task.error is not None else []
        parts += [error_line(task.result)] if task.result is not None else []
        text = ": ".join(part for part in parts if part)
    elif task.status is State.PENDING and task.last_error is not None:
        text = "last error: " + error_line(task.last_error)
    else:
        text = _text(task.item)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _end(task: Task) -> str:
    return end_in_words(task.error or "", attempts=task.attempts, max_attempts=task.max_attempts)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def cursor_text(key: OrderKey | None) -> str:
    return f"{key[0]}.{key[1]}.{key[2]}" if key else ""


def parse_cursor(text: str | None) -> OrderKey | None:
    """'postedAt.seq.id' as the store's order key; None for anything else (the first page)."""
    parts = (text or "").split(".")
    if len(parts) != 3:
        return None
    posted, seq, task_id = parts
    digits = (posted + seq).isascii() and posted.isdigit() and seq.isdigit()
    if not (digits and len(posted) <= 16 and len(seq) <= 20):
        return None
    if len(task_id) != 16 or any(c not in "0123456789abcdef" for c in task_id):
        return None
    return (int(posted), int(seq), task_id)


def settings_glance(queue: Queue) -> list[tuple[str, str]]:
    """The queue's settings as an operator reads them, in words."""
    if queue.max_attempts:
        first, cap = (
            readable_seconds(queue.backoff_seconds),
            readable_seconds(queue.backoff_cap_seconds),
        )
        attempts = (
            f"{queue.max_attempts}; a retry waits {first}, times {queue.backoff_factor} "
            f"each time, at most {cap}"
        )
    else:
        attempts = "no budget: a lapsed lease runs it again until the queue timeout"
    after = "after it is fetched" if queue.retain_from == "fetched" else "after it ends"
    return [
        ("queue timeout", readable_seconds(queue.queue_seconds)),
        ("lease", readable_seconds(queue.lease_seconds)),
        ("kept", f"{readable_seconds(queue.retain_seconds)} {after}"),
        ("attempts", attempts),
        ("pending at most", f"{queue.max_pending:,}" if queue.max_pending else "no limit"),
        ("item size at most", f"{queue.max_item_bytes:,} bytes"),
        ("item schema", "set" if queue.item_schema else "none"),
        ("public posts", "allowed" if queue.public_post else "no, a token is needed"),
        ("payload archive", "on" if queue.archive_payloads else "off"),
    ]


def _number(raw: str | None) -> int:
    if not raw or not (raw.isascii() and raw.isdigit()):  # isdigit() alone takes "²"
        return 1
    return int(raw) if 0 < int(raw) < 1_000_000 else 1
