"""PostgresStore: the task store on PostgreSQL, with the file store's contract (TaskStore).

Every verb is one transaction: it locks the rows it changes (FOR UPDATE, or FOR UPDATE SKIP
LOCKED for claims and the sweep), decides the change with the rules both stores share
(queues/store/rules.py: fencing, replays, backoff, the attempt budget, the sweep's verdicts)
and writes it with its event row, archived bodies and NOTIFY (writes.py). So many web servers
on many machines can serve one queue: the database is the only thing they share.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import psycopg
from psycopg import sql

from queues.store import archive, batch, paths, posting, rules
from queues.store import limits as flow
from queues.store.background import Background
from queues.store.batch import OnComplete, PostEntry, Report
from queues.store.clock import now_ms
from queues.store.dependencies import Later
from queues.store.errors import (
    IdempotencyKeyReused,
    InvalidRequest,
    LeaseLost,
    NotArchived,
    NotDeletable,
    NotFound,
    StorageUnavailable,
    StoreError,
)
from queues.store.eventlog import NO_REASON, Because
from queues.store.interface import TaskStore
from queues.store.limits import FlowState
from queues.store.records import State, Task
from queues.store.results import ANY, GroupView, PostResult, QueueStats, Reported, TaskPage, _Any
from queues.store.rules import Change
from queues.store.selecting import Found, OrderKey, Selection, StateCounts
from queues.store.settings import QueueSettings
from queues.store.sweep import SweepReport
from queues.store.sweep_preview import SweepPreview

from . import dependencies, feed, groups, limits, preview, reads, rows, schema, sweeping
from .config import PgStoreConfig
from .following import SETTLE_SECONDS, EventFollower
from .pool import Pool
from .statistics import TableStatistics
from .waits import Waits
from .writes import Conn, Writer, lock, lock_many

# the task a key names (the unique index th_tasks_idempotency answers either)
_KEY_OF = (
    "SELECT key_item_hash, record::text FROM th_tasks"
    " WHERE host = %s AND queue = %s AND idempotency_key = %s AND "
)
_KEY_OF_PUBLIC = _KEY_OF + "posted_by IS NULL AND %s::text IS NULL"
_KEY_OF_PRODUCER = _KEY_OF + "posted_by = %s"


@dataclass(frozen=True)
class _Joining:
    """The group a post's tasks join (None: none), and the onComplete that closes it."""

    group: str | None
    on_complete: OnComplete | None
    posted_by: str | None


class PostgresStore:
    def __init__(self, config: PgStoreConfig) -> None:
        self.config = config
        self._pool = Pool(config.dsn, schema=config.schema, size=config.pool_size)
        with self._pool.connection() as conn:
            schema.ensure(conn, config)
        # the releases of dependents an ending's transaction hands on (dependencies.py)
        self._releases: Background[Later] = Background(self._release_later,
                                                       name="taskhoster-release")  # fmt: skip
        self._writer = Writer(config.events_table, hand_on=self._releases.hand)
        self._events = sql.Identifier(config.events_table)
        self._waits = Waits(self._pool, poll_seconds=config.poll_seconds)
        self._statistics = TableStatistics(self._pool)
        self._known_queues: set[tuple[str, str]] = set()

    def close(self) -> None:
        self._releases.wait()  # they use the pool, closed next
        self._waits.close()
        self._pool.close()

    def wait_releases(self, timeout: float | None = None) -> bool:
        """Block until the releases of dependents this process's endings handed on are done;
        whether they are. For tests and benchmarks: a server never waits for them."""
        return self._releases.wait(timeout)

    def _release_later(self, later: Later) -> None:
        try:
            with self._pool.connection() as conn:
                dependencies.release_later(conn, self._writer.apply_released, later)
        except psycopg.Error as exc:  # the server gone, a deadlock broken: the sweep's then
            raise StorageUnavailable(f"The release of {later[2]}'s waiters stopped: {exc}") from exc

    # -- queues -----------------------------------------------------------------------------

    def create_queue(self, host: str, queue: str) -> None:
        with self._pool.connection() as conn:
            self._make_queue(conn, host, queue)

    def queues(self) -> list[tuple[str, str]]:
        with self._pool.connection() as conn:
            found = conn.execute("SELECT host, queue FROM th_queues ORDER BY host, queue")
            return [(str(host), str(queue)) for host, queue in found.fetchall()]

    def holds_queue(self, host: str, queue: str) -> bool:
        """Always: the database holds every PostgreSQL queue for every server."""
        return True

    def _make_queue(self, conn: Conn, host: str, queue: str) -> None:
        key = (paths.validate_host(host), paths.validate_queue(queue))
        if key in self._known_queues:
            return
        conn.execute(
            "INSERT INTO th_queues (host, queue) VALUES (%s, %s) ON CONFLICT DO NOTHING", key
        )
        self._known_queues.add(key)

    def _queue_exists(self, conn: Conn, host: str, queue: str) -> None:
        """NotFound for a queue nothing made yet (as the file store answers for a queue with
        no directories)."""
        key = (paths.validate_host(host), paths.validate_queue(queue))
        if key in self._known_queues:
            return
        found = conn.execute(
            "SELECT 1 FROM th_queues WHERE host = %s AND queue = %s", key
        ).fetchone()
        if found is None:
            raise NotFound()
        self._known_queues.add(key)

    # -- producers --------------------------------------------------------------------------

    def post(
        self,
        host: str,
        queue: str,
        item: Any,
        *,
        settings: QueueSettings,
        posted_by: str | None,
        priority: int = 0,
        delay_seconds: int = 0,
        idempotency_key: str | None = None,
        now: int | None = None,
        reposted_from: str | None = None,
        because: Because = NO_REASON,
        after: list[str] | None = None,
        on_dependency_failure: str | None = None,
        concurrency_key: str | None = None,
        group: str | None = None,
        on_complete: OnComplete | None = None,
    ) -> PostResult:
        now = now_ms(now)
        group = rules.check_group(group, on_complete, host)
        entry = PostEntry(
            item=item,
            priority=priority,
            delay_seconds=delay_seconds,
            idempotency_key=idempotency_key,
            after=tuple(after or ()),
            on_dependency_failure=on_dependency_failure,
            concurrency_key=concurrency_key,
        )
        task = rules.new_task(host, queue, entry, settings=settings, posted_by=posted_by,
                              now=now, reposted_from=reposted_from, group=group)  # fmt: skip
        joining = _Joining(group, on_complete, posted_by)
        return self._admit(
            [task], settings=settings, now=now, because=because, batch=False, joining=joining
        )[0]

    def post_many(
        self,
        host: str,
        queue: str,
        entries: list[PostEntry],
        *,
        settings: QueueSettings,
        posted_by: str | None,
        now: int | None = None,
        group: str | None = None,
        on_complete: OnComplete | None = None,
    ) -> list[PostResult]:
        """All or nothing: every entry is checked, and the whole batch is one transaction."""
        now = now_ms(now)
        group = rules.check_group(group, on_complete, host)
        batch.check_size(entries, "tasks")
        repeat = batch.first_repeat([entry.idempotency_key for entry in entries])
        if repeat is not None:
            raise InvalidRequest(
                "Two entries of the batch have the same Idempotency-Key; each key may be used once."
            ).at(repeat)
        tasks = []
        for index, entry in enumerate(entries):
            try:
                task = rules.new_task(
                    host,
                    queue,
                    entry,
                    settings=settings,
                    posted_by=posted_by,
                    now=now,
                    group=group,
                )
                tasks.append(task)
            except StoreError as exc:
                raise exc.at(index) from exc
        joining = _Joining(group, on_complete, posted_by)
        return self._admit(
            tasks, settings=settings, now=now, because=NO_REASON, batch=True, joining=joining
        )

    def _admit(
        self,
        tasks: list[Task],
        *,
        settings: QueueSettings,
        now: int,
        because: Because,
        batch: bool,
        joining: _Joining,
    ) -> list[PostResult]:
        host, queue = tasks[0].host, tasks[0].queue
        with self._pool.transaction() as conn:
            self._make_queue(conn, host, queue)
            if settings.max_pending:
                # capped posts count and insert one at a time per queue: maxPending is exact
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"taskhoster/posts/{host}/{queue}",),
                )
            # every key looked at before anything is written: a reused one refuses the batch;
            # and before the room is counted, since a replay adds nothing to the queue
            priors = self._prior_keys(conn, tasks, batch=batch)
            tasks, ended = self._dependencies(conn, tasks, priors, batch=batch)
            adding = len(tasks) - len(priors)
            if settings.max_pending and adding:
                pending = conn.execute(
                    "SELECT count(*) FROM th_tasks"
                    " WHERE host = %s AND queue = %s AND status IN ('pending', 'waiting')",
                    (host, queue),
                ).fetchone()
                posting.check_room(int(pending[0]) if pending else 0, settings, adding=adding)
            self._writer.insert(
                conn,
                [t for t in tasks if t.idempotency_key is None],
                now=now,
                settings=settings,
                because=because,
            )
            for index, task in enumerate(tasks):
                if task.idempotency_key is None or task.id in priors:
                    continue
                if self._writer.insert_keyed(
                    conn, task, now=now, settings=settings, because=because
                ):
                    continue
                # another post took the key since we looked, and committed: a replay of it
                prior = self._prior_keys(conn, [task], batch=False, index=index if batch else None)
                if task.id not in prior:
                    raise StorageUnavailable("The idempotency key kept changing; try again.")
                priors.update(prior)
            new = [task for task in tasks if task.id not in priors]
            if joining.group is not None and new:  # a replay joins nothing: its group may be closed
                groups.register(conn, joining.group, new, on_complete=joining.on_complete,
                                posted_by=joining.posted_by)  # fmt: skip
            for task in tasks:
                if task.id in ended and task.id not in priors:
                    dependencies.settle_new(conn, self._writer.apply_released, task, ended[task.id],
                                            now=now)  # fmt: skip
        self._statistics.inserted(len(tasks) - len(priors))
        return [
            PostResult(task=priors[t.id], replayed=True)
            if t.id in priors
            else PostResult(task=t, replayed=False)
            for t in tasks
        ]

    def _dependencies(
        self, conn: Conn, tasks: list[Task], priors: dict[str, Task], *, batch: bool
    ) -> tuple[list[Task], dict[str, dict[str, State]]]:
        """Each new task with `after` ready to insert (dependencies.prepare, naming the batch
        entry it refuses), and the ended dependencies of each."""
        ready, ended = [], {}
        for index, task in enumerate(tasks):
            if task.after and task.id not in priors:
                try:
                    task, ended[task.id] = dependencies.prepare(conn, task)
                except StoreError as exc:
                    raise (exc.at(index) if batch else exc) from exc
            ready.append(task)
        return ready, {task_id: found for task_id, found in ended.items() if found}

    def _prior_keys(
        self, conn: Conn, tasks: list[Task], *, batch: bool, index: int | None = None
    ) -> dict[str, Task]:
        """The task each keyed post's key already names (by the new task's id); a key used with
        another item is refused (naming the batch entry: its place in `tasks`, or `index`)."""
        priors: dict[str, Task] = {}
        for place, task in enumerate(tasks):
            if task.idempotency_key is None:
                continue
            found = conn.execute(
                _KEY_OF_PUBLIC if task.posted_by is None else _KEY_OF_PRODUCER,
                (task.host, task.queue, task.idempotency_key, task.posted_by),
            ).fetchone()
            if found is None:
                continue
            if found[0] != posting.item_hash(task.item):
                error = IdempotencyKeyReused()
                if batch or index is not None:
                    raise error.at(place if index is None else index)
                raise error
            priors[task.id] = rows.task_of(found[1])
        return priors

    def read(self, host: str, queue: str, task_id: str) -> Task:
        paths.validate_task_id(task_id)
        with self._pool.connection() as conn:
            return reads.read(conn, host, queue, task_id)

    def read_group(
        self, host: str, queue: str, group: str, *, seen_by: str | _Any | None = ANY
    ) -> GroupView:
        with self._pool.connection() as conn:
            self._queue_exists(conn, host, queue)
            return groups.read_group(conn, host, queue, group, seen_by=seen_by)

    def group_names(self, host: str, queue: str, *, limit: int = 100) -> list[str]:
        with self._pool.connection() as conn:
            self._queue_exists(conn, host, queue)
            return groups.names(conn, host, queue, limit=limit)

    def group_members(self, host: str, queue: str, group: str, *, limit: int = 50) -> list[Task]:
        with self._pool.connection() as conn:
            self._queue_exists(conn, host, queue)
            groups.read_group(conn, host, queue, group)  # NotFound for none
            ids = list(groups.member_ids(conn, host, queue, group, limit=limit))
            found = conn.execute(
                "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s AND id = ANY(%s)",
                (host, queue, ids),
            ).fetchall()
        tasks = [rows.task_of(row[0]) for row in found]
        return sorted(tasks, key=lambda t: (t.posted_at, t.seq, t.id))

    def fetch(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        now: int | None = None,
        current: Task | None = None,
    ) -> Task:
        """The producer's read: the first read of an ended task sets fetchedAt."""
        task = self.read(host, queue, task_id) if current is None else current
        if not task.status.terminal or task.fetched_at is not None:
            return task
        now = now_ms(now)
        with self._pool.transaction() as conn:
            task = lock(conn, host, queue, task_id)
            if not task.status.terminal or task.fetched_at is not None:
                return task  # someone else stamped (or retried) it first
            change = Change(rows.DIRECTORY[task.status], task, task.replace(fetched_at=now),
                            "fetched")  # fmt: skip
            return self._writer.apply(conn, [change], now=now, worker=None, settings=None)[0]

    def wait_for_change(
        self, host: str, queue: str, task_id: str, *, since: int, wait_seconds: float
    ) -> Task:
        """As soon as the task's updatedAt differs from `since`, or when the wait ends."""
        deadline = time.monotonic() + wait_seconds
        key = (host, queue)
        while True:
            generation = self._waits.generation(key)
            task = self.read(host, queue, task_id)
            remaining = deadline - time.monotonic()
            if task.updated_at != since or remaining <= 0:
                return task
            self._waits.wait(key, generation, remaining)

    # -- owners and operators ---------------------------------------------------------------

    def _change_one(
        self,
        host: str,
        queue: str,
        task_id: str,
        plan: Any,
        *,
        now: int,
        settings: QueueSettings | None,
        worker_of_lease: bool = False,
    ) -> Task:
        """Lock the task, ask `plan(task, directory)` for its change (None: nothing to do),
        write it. `worker_of_lease`: the event names the lease's worker (an operator's requeue)."""
        paths.validate_task_id(task_id)
        with self._pool.transaction() as conn:
            task = lock(conn, host, queue, task_id)
            change: Change | None = plan(task, rows.DIRECTORY[task.status])
            if change is None:
                return task
            return self._writer.apply(conn, [change], now=now, worker=None, settings=settings,
                                      lease_worker=worker_of_lease)[0]  # fmt: skip

    def cancel(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> Task:
        now = now_ms(now)
        return self._change_one(
            host, queue, task_id,
            lambda task, source: rules.plan_cancel(task, source, now=now, by=by),
            now=now, settings=None,
        )  # fmt: skip

    def retry(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
        item: Any = None,
    ) -> Task:
        """failed or cancelled -> pending; a task posted with `after` waits again for what has
        not finished of it, and a failed or gone one refuses the retry (rules.plan_retry)."""
        now = now_ms(now)
        if item is not None:
            posting.check_item(item, settings)
        paths.validate_task_id(task_id)
        with self._pool.transaction() as conn:
            statuses = dependencies.retry_statuses(conn, host, queue, task_id)
            task = lock(conn, host, queue, task_id)
            change = rules.plan_retry(task, rows.DIRECTORY[task.status], settings=settings,
                                      now=now, by=by, item=item, dependencies=statuses)  # fmt: skip
            dependencies.register(conn, change.new, change.new.waiting_for or [])
            return self._writer.apply(conn, [change], now=now, worker=None, settings=settings)[0]

    def requeue(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> Task:
        now = now_ms(now)
        return self._change_one(
            host, queue, task_id,
            lambda task, source: rules.plan_requeue(task, source, now=now, by=by),
            now=now, settings=settings, worker_of_lease=True,
        )  # fmt: skip

    def hasten(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> Task:
        """A pending task waiting out its backoff or delay, claimable now (`hastened`)."""
        now = now_ms(now)
        return self._change_one(
            host, queue, task_id,
            lambda task, source: rules.plan_hasten(task, source, now=now, by=by),
            now=now, settings=settings,
        )  # fmt: skip

    def delete(
        self, host: str, queue: str, task_id: str, *, now: int | None = None, by: str | None = None
    ) -> Task:
        """An operator removes an ended task now (`deleted`); its archive and events stay."""
        now = now_ms(now)
        paths.validate_task_id(task_id)
        with self._pool.transaction() as conn:
            task = lock(conn, host, queue, task_id)
            if not task.status.terminal:
                raise NotDeletable()
            self._writer.remove(conn, [task], now=now, event="deleted", because=Because(by=by))
            return task

    def repost(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
        by: str | None = None,
    ) -> PostResult:
        """A new task with the item `task_id` last ran with, from the payload archive."""
        paths.validate_task_id(task_id)
        body = self._latest_item(host, queue, task_id)
        return self.post(host, queue, body, settings=settings, posted_by=by, now=now,
                         reposted_from=task_id, because=Because(by=by))  # fmt: skip

    def _latest_item(self, host: str, queue: str, task_id: str) -> Any:
        with self._pool.connection() as conn:
            names = conn.execute(
                "SELECT name, body FROM th_payloads"
                " WHERE host = %s AND queue = %s AND task_id = %s",
                (host, queue, task_id),
            ).fetchall()
        bodies = {str(name): bytes(body) for name, body in names}
        name = archive.latest_item_name(bodies)
        if name not in bodies:
            raise NotArchived()
        return orjson.loads(bodies[name])

    def has_archived_item(self, host: str, queue: str, task_id: str) -> bool:
        return self.archived_payload(host, queue, task_id, archive.TASK_FILES["item"]) is not None

    def archived_payload(self, host: str, queue: str, task_id: str, name: str) -> bytes | None:
        """One archived file's bytes, under the file archive's name (item.json,
        progress.jsonl, `<attempt>-<event>.result.json`...); None if it is not kept."""
        with self._pool.connection() as conn:
            found = conn.execute(
                "SELECT body FROM th_payloads"
                " WHERE host = %s AND queue = %s AND task_id = %s AND name = %s",
                (host, queue, task_id, name),
            ).fetchone()
        return bytes(found[0]) if found is not None else None

    def events_since(
        self, host: str, queue: str, after_id: int, limit: int = 100
    ) -> list[tuple[int, dict[str, Any]]]:
        """The queue's event rows past `after_id` (the table's id) visible now, oldest first,
        each as (id, the file store's line). Not a feed to follow by the last id: a row with
        a lower id may still commit later; a follower uses follow_events."""
        with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=reads.dict_row)
            found = cur.execute(
                sql.SQL(
                    "SELECT * FROM {} WHERE host = %s AND queue = %s AND id > %s"
                    " ORDER BY id LIMIT %s"
                ).format(self._events),
                (host, queue, after_id, limit),
            ).fetchall()
        return [(int(row["id"]), rows.line_of(row)) for row in found]

    def last_event_id(self, host: str, queue: str, *, before_ms: int | None = None) -> int:
        """The id of the queue's newest event row (0 when it has none): one probe of the
        (host, queue, id) index, where a new follower of the queue starts. `before_ms`: the
        newest row stamped before then, where a follower of a task's history starts (the
        scan walks back over the rows since, which that follower reads anyway)."""
        newest = (
            "SELECT id FROM {} WHERE host = %s AND queue = %s ORDER BY id DESC LIMIT 1"
            if before_ms is None
            else "SELECT id FROM {} WHERE host = %s AND queue = %s"
            " AND at < to_timestamp(%s / 1000.0) ORDER BY id DESC LIMIT 1"
        )
        params = (host, queue) if before_ms is None else (host, queue, before_ms)
        with self._pool.connection() as conn:
            found = conn.execute(sql.SQL(newest).format(self._events), params).fetchone()
        return int(found[0]) if found is not None else 0

    def follow_events(
        self,
        host: str,
        queue: str,
        *,
        after_id: int | None,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> EventFollower:
        """A follower of the queue's event rows past `after_id` (None: from the newest row
        now), handing each out once, in id order, once every lower id is there or has been
        missing `settle_seconds` (following.py); woken by the store's LISTEN thread."""
        start = self.last_event_id(host, queue) if after_id is None else after_id
        return EventFollower(self._pool, self._waits, self._events, host, queue,
                             after_id=start, settle_seconds=settle_seconds)  # fmt: skip

    # -- listings ---------------------------------------------------------------------------

    def list_tasks(
        self,
        host: str,
        queue: str,
        *,
        status: str | None = None,
        posted_by: str | _Any | None = ANY,
        limit: int = 50,
        offset: int = 0,
    ) -> TaskPage:
        wanted = State(status) if status is not None else None
        with self._pool.connection() as conn:
            self._queue_exists(conn, host, queue)
            return reads.list_tasks(conn, host, queue, status=wanted, posted_by=posted_by,
                                    limit=limit, offset=offset)  # fmt: skip

    def stats(self, host: str, queue: str, *, now: int | None = None) -> QueueStats:
        now = now_ms(now)
        with self._pool.connection() as conn:
            self._queue_exists(conn, host, queue)
            return reads.stats(conn, host, queue, now=now)

    def find(
        self,
        host: str,
        queue: str,
        selection: Selection,
        *,
        newest_first: bool = True,
        limit: int = 50,
        offset: int = 0,
        after: OrderKey | None = None,
        until: OrderKey | None = None,
        budget: int = 2_000,
    ) -> Found:
        with self._pool.connection() as conn:
            self._queue_exists(conn, host, queue)
            return reads.find(conn, host, queue, selection, newest_first=newest_first,
                              limit=limit, offset=offset, after=after, until=until,
                              budget=budget)  # fmt: skip

    def state_counts(self, host: str, queue: str, *, now: int | None = None) -> StateCounts:
        now = now_ms(now)
        with self._pool.connection() as conn:
            self._queue_exists(conn, host, queue)
            return reads.state_counts(conn, host, queue, now=now)

    def claimable_ahead(self, host: str, queue: str, task: Task, *, now: int) -> int:
        with self._pool.connection() as conn:
            return reads.claimable_ahead(conn, host, queue, task.id, now=now)

    def flow_state(
        self, host: str, queue: str, *, settings: QueueSettings, now: int | None = None
    ) -> FlowState:
        """The queue's flow control now: processing, the bucket's fill, processing per key."""
        now = now_ms(now)
        with self._pool.connection() as conn:
            self._queue_exists(conn, host, queue)
            return limits.state(conn, host, queue, settings, now)

    # -- workers ----------------------------------------------------------------------------

    def claim(
        self,
        host: str,
        queue: str,
        *,
        settings: QueueSettings,
        worker: str,
        lease_seconds: int | None = None,
        max_tasks: int = 1,
        now: int | None = None,
    ) -> list[Task]:
        """Up to `max_tasks` pending tasks, highest priority first, then by postedAt (as the
        file store), then in post order (the row's seq: a tie in one millisecond); rows
        another claim holds are skipped (SKIP LOCKED), so concurrent claims never wait on
        each other nor take one task twice. [] when there is none or the queue is paused."""
        live, now = now is None, now_ms(now)
        lease_ms = rules.checked_lease_ms(settings, lease_seconds)
        rules.check_worker(worker)
        rules.check_max_tasks(max_tasks)
        if settings.paused:
            return []
        with self._pool.transaction() as conn:
            self._make_queue(conn, host, queue)
            gate = None
            if settings.limited:
                gate = limits.Gate(conn, host, queue, settings, now=now, live=live,
                                   max_tasks=max_tasks)  # fmt: skip
                found = [(record,) for record in gate.candidates()]
                now = gate.now
            else:
                found = conn.execute(
                    "SELECT record::text FROM th_tasks"
                    " WHERE host = %s AND queue = %s AND status = 'pending' AND available_at <= %s"
                    " ORDER BY priority DESC, posted_at, seq LIMIT %s FOR UPDATE SKIP LOCKED",
                    (host, queue, now, max_tasks),
                ).fetchall()
            changes = []
            for (record,) in found:
                task = rows.task_of(record)
                stamp = rules.claim_stamp(task, now, live=live)
                new = rules.claimed(task, worker=worker, lease_ms=lease_ms, now=stamp)
                changes.append(Change("processing", task, new, "claimed"))
            stamp = max([now, *(change.new.updated_at for change in changes)])
            tasks = self._writer.apply(conn, changes, now=stamp, worker=worker, settings=None)
            if gate is None:
                return tasks
            gate.spend(len(tasks))
            return gate.answer(tasks)

    def wait_claim(
        self,
        host: str,
        queue: str,
        *,
        settings: QueueSettings,
        worker: str,
        wait_seconds: float,
        lease_seconds: int | None = None,
        max_tasks: int = 1,
        still_wanted: Callable[[], bool] | None = None,
    ) -> list[Task]:
        """Claim, blocking up to `wait_seconds`: woken by any post (or retry, or requeue) to
        the queue from any process on any machine, and looking again at least every
        poll_seconds (a delayed task coming due, a lost notification). `still_wanted` is
        asked before each look, and at least every STILL_WANTED_SECONDS: once false, the
        wait ends with nothing taken."""
        deadline = time.monotonic() + max(0.0, float(wait_seconds))
        key = (host, queue)
        wanted = still_wanted or (lambda: True)
        most = rules.STILL_WANTED_SECONDS if still_wanted is not None else float("inf")

        def claim_now() -> list[Task]:
            return self.claim(host, queue, settings=settings, worker=worker,
                              lease_seconds=lease_seconds, max_tasks=max_tasks)  # fmt: skip

        if not wanted():
            return []
        tasks = claim_now()
        if tasks or wait_seconds <= 0:
            return tasks
        while True:
            generation = self._waits.generation(key)
            if not wanted():
                return []
            tasks = claim_now()  # again, now that a notification would be counted
            remaining = deadline - time.monotonic()
            if tasks or remaining <= 0:
                return tasks
            # held back: a token comes, or room (no post announces either)
            self._waits.wait(key, generation, min(remaining, flow.recheck_in(tasks), most))

    def unclaim(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        worker: str,
        attempt: int,
        now: int | None = None,
    ) -> Task:
        """Give back a claim whose caller left before it heard of it (rules.plan_unclaim)."""
        now = now_ms(now)
        return self._change_one(
            host, queue, task_id,
            lambda task, source: rules.plan_unclaim(task, source, worker, attempt, now=now),
            now=now, settings=settings, worker_of_lease=True,
        )  # fmt: skip

    def progress(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        worker: str,
        attempt: int,
        progress: Any = None,
        lease_seconds: int | None = None,
        now: int | None = None,
    ) -> Task:
        """Record progress (optional) and extend the lease; without a body, a heartbeat that
        writes no event row."""
        now = now_ms(now)
        if lease_seconds is not None:
            rules.checked_lease_ms(settings, lease_seconds)
        if progress is not None:
            posting.check_size("progress", progress, settings)

        def plan(task: Task, source: str) -> Change:
            new = rules.progressed(
                task, settings=settings, worker=worker, attempt=attempt, progress=progress,
                lease_seconds=lease_seconds, now=now,
            )  # fmt: skip
            body = {"progress": progress} if progress is not None else {}
            return Change(source, task, new, "progress" if progress is not None else None, body)

        with self._pool.transaction() as conn:
            task = lock(conn, host, queue, paths.validate_task_id(task_id))
            change = plan(task, rows.DIRECTORY[task.status])
            return self._writer.apply(conn, [change], now=now, worker=worker, settings=settings)[0]

    def finish(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        worker: str,
        attempt: int,
        result: Any,
        now: int | None = None,
    ) -> Reported:
        now = now_ms(now)
        posting.check_size("result", result, settings)
        return self._report(
            host, queue, task_id,
            lambda task, source: rules.plan_finish(task, source, worker, attempt, result, now=now),
            now=now, worker=worker, settings=settings,
        )  # fmt: skip

    def fail(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        worker: str,
        attempt: int,
        result: Any = None,
        retry: bool = False,
        cancelled: bool = False,
        now: int | None = None,
    ) -> Reported:
        now = now_ms(now)
        if result is not None:
            posting.check_size("result", result, settings)
        return self._report(
            host, queue, task_id,
            lambda task, source: rules.plan_fail(
                task, source, worker, attempt, result, retry=retry, cancelled=cancelled,
                settings=settings, now=now,
            ),
            now=now, worker=worker, settings=settings,
        )  # fmt: skip

    def _report(
        self,
        host: str,
        queue: str,
        task_id: str,
        plan: Any,
        *,
        now: int,
        worker: str,
        settings: QueueSettings,
    ) -> Reported:
        paths.validate_task_id(task_id)
        with self._pool.transaction() as conn:
            task = lock(conn, host, queue, task_id)
            planned: Change | Reported = plan(task, rows.DIRECTORY[task.status])
            if isinstance(planned, Reported):
                return planned
            done = self._writer.apply(conn, [planned], now=now, worker=worker, settings=settings)
            return Reported(task=done[0], replayed=False)

    def finish_many(
        self,
        host: str,
        queue: str,
        reports: list[Report],
        *,
        settings: QueueSettings,
        worker: str,
        now: int | None = None,
    ) -> list[Reported | StoreError]:
        """Up to 100 outcomes in one transaction, each answered on its own (a Reported, or
        that entry's refusal); refused whole for an empty or oversized batch, or one task
        reported twice."""
        now = now_ms(now)
        batch.check_size(reports, "outcomes")
        repeat = batch.first_repeat([report.task_id for report in reports])
        if repeat is not None:
            raise InvalidRequest("The batch reports one task twice.").at(repeat)
        answers: list[Reported | StoreError | None] = [None] * len(reports)
        for index, report in enumerate(reports):
            try:
                paths.validate_task_id(report.task_id)
                if report.outcome == "result" or report.result is not None:
                    posting.check_size("result", report.result, settings)
            except StoreError as exc:
                answers[index] = exc.at(index)
        with self._pool.transaction() as conn:
            wanted = [r.task_id for i, r in enumerate(reports) if answers[i] is None]
            locked = lock_many(conn, host, queue, wanted) if wanted else {}
            changes: list[tuple[int, Change]] = []
            for index, report in enumerate(reports):
                if answers[index] is not None:
                    continue
                task = locked.get(report.task_id)
                try:
                    if task is None:
                        raise NotFound()
                    planned = rules.plan_report(task, rows.DIRECTORY[task.status], worker,
                                                report, settings=settings, now=now)  # fmt: skip
                except (NotFound, LeaseLost, InvalidRequest) as exc:
                    answers[index] = exc.at(index)
                    continue
                if isinstance(planned, Reported):
                    answers[index] = planned
                else:
                    changes.append((index, planned))
            done = self._writer.apply(
                conn, [change for _, change in changes], now=now, worker=worker, settings=settings
            )
        for (index, _), task in zip(changes, done, strict=True):
            answers[index] = Reported(task=task, replayed=False)
        assert all(answer is not None for answer in answers)
        return answers  # type: ignore[return-value]

    # -- the sweep --------------------------------------------------------------------------

    def sweep_queue(
        self, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
    ) -> SweepReport:
        """Queue timeout, lease timeout (with the attempt budget) and retention on one queue,
        in SKIP LOCKED batches: a sweep in another process skips what this one holds and
        finds it changed afterwards, so no task is acted on twice."""
        now = now_ms(now)
        with self._pool.connection() as conn:
            return sweeping.sweep_queue(
                conn, self._writer, host, queue, settings, now=now,
                retain_days=self.config.log_retain_days, events=self._events,
            )  # fmt: skip

    def preview_sweep(
        self, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
    ) -> SweepPreview:
        """What the next sweep would do to the queue with `settings` at `now`, by the sweep's
        own rules on the rows as they are; reads only (a queue never posted to: nothing)."""
        now = now_ms(now)
        with self._pool.connection() as conn:
            return preview.preview_queue(conn, host, queue, settings, now=now)

    # -- the events table, read in order by the console (failure webhooks, Task Logs) -------

    @property
    def events_table(self) -> str:
        return self.config.events_table

    def event_horizon(self) -> feed.Horizon:
        """The highest event id now, and the transactions still writing event rows (feed.py)."""
        with self._pool.connection() as conn:
            return feed.horizon(conn, self.config.events_table)

    def horizon_settled(self, seen: feed.Horizon) -> bool:
        """Whether no event row with an id up to `seen.top` can appear any more."""
        with self._pool.connection() as conn:
            return feed.settled(conn, self.config.events_table, seen)

    def event_rows(
        self, *, after: int, upto: int, limit: int, events: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        """The store's event rows with after < id <= upto, oldest first (feed.event_rows)."""
        with self._pool.connection() as conn:
            return feed.event_rows(conn, self.config.events_table, after=after, upto=upto,
                                   limit=limit, events=events)  # fmt: skip


if TYPE_CHECKING:

    def _is_a_task_store(store: PostgresStore) -> TaskStore:
        """mypy's proof that PostgresStore implements every TaskStore method, as declared."""
        return store
