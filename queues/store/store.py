"""QueueStore: the verbs of the store. The only code that decides what a transition writes."""

from __future__ import annotations

import os
import secrets
import threading
import time
import weakref
from typing import Any

from . import copies, files, paths, posting, working
from .archive import PayloadArchive
from .clock import now_ms
from .errors import InvalidRequest, NotCancellable, NotFound, NotRetryable
from .eventlog import EventLog
from .index import PendingIndex
from .listing_index import ListingIndexes
from .paths import QueueDirs
from .records import State, Task, check_transition
from .results import ANY, PostResult, QueueStats, TaskPage, _Any
from .settings import QueueSettings, StoreConfig
from .waiting import arrivals, changes, watcher


class QueueStore:
    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.fsync = config.fsync
        self.log = EventLog(config.logs_dir, fsync=config.fsync)
        self.archive = PayloadArchive(config.logs_dir, fsync=config.fsync)
        self.root_fd = paths.open_root(config.items_dir)
        self._dirs: dict[tuple[str, str], QueueDirs] = {}
        self._indexes: dict[tuple[str, str], PendingIndex] = {}
        self.lock = threading.RLock()  # guards the caches and indexes, never a disk write
        self.listings = ListingIndexes(changes)
        self._finalizer = weakref.finalize(
            self, _close, self.root_fd, self._dirs, self.log, self.listings
        )

    def close(self) -> None:
        self._finalizer()

    # -- places -----------------------------------------------------------------------------

    def dirs(self, host: str, queue: str, *, create: bool = False) -> QueueDirs:
        key = (paths.validate_host(host), paths.validate_queue(queue))
        with self.lock:
            qd = self._dirs.get(key)
            if qd is None:
                qd = self._dirs[key] = QueueDirs(
                    self.root_fd, host, queue, create=create, fsync=self.fsync
                )
            return qd

    def index(self, qd: QueueDirs) -> PendingIndex:
        """The fresh pending index of a queue; call with self.lock held."""
        key = (qd.host, qd.queue)
        idx = self._indexes.get(key)
        if idx is None:
            idx = self._indexes[key] = PendingIndex(
                qd.fd("pending"), qd.proc_path("pending"), changes()
            )
        idx.refresh()
        return idx

    def note_pending(self, qd: QueueDirs, task: Task) -> None:
        """Our own write into pending/ reaches the index now; inotify brings other processes'."""
        with self.lock:
            idx = self._indexes.get((qd.host, qd.queue))
            if idx is not None:
                idx.add(task)

    def queues(self) -> list[tuple[str, str]]:
        return paths.list_queues(self.root_fd)

    # -- one place for "write, then log" ----------------------------------------------------

    def apply(
        self,
        qd: QueueDirs,
        source: str,
        old: Task,
        new: Task,
        event: str | None,
        *,
        now: int,
        worker: str | None = None,
        archive: dict[str, Any] | None = None,
        settings: QueueSettings | None = None,
    ) -> Task:
        """Check the table, archive bodies, write the new record, then append the event line."""
        check_transition(new.id, old.status, new.status)
        archived = []
        if settings is not None and settings.archive_payloads:
            archived = [self._archive(new, kind, body) for kind, body in (archive or {}).items()]
        copies.commit(qd, source, new, fsync=self.fsync)
        if new.status is State.PENDING:
            self.note_pending(qd, new)
        if event is not None:
            self.log.append(new, event, now=now, worker=worker, archived=archived)
        return new

    def _archive(self, task: Task, kind: str, body: Any) -> str:
        if kind == "progress":
            return self.archive.append_progress(task.host, task.queue, task.id, body)
        return self.archive.write(task.host, task.queue, task.id, kind, body)

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
    ) -> PostResult:
        now = now_ms(now)
        posting.check_item(item, settings)
        posting.check_options(settings, priority, delay_seconds, idempotency_key)
        qd = self.dirs(host, queue, create=True)
        if settings.max_pending:
            with self.lock:
                posting.check_room(len(self.index(qd).entries), settings)
        budget = settings.attempt_budget()
        task = Task(
            id=secrets.token_hex(8),
            host=qd.host,
            queue=qd.queue,
            status=State.PENDING,
            item=item,
            posted_by=posted_by,
            posted_at=now,
            updated_at=now,
            rev=1,
            priority=priority,
            available_at=now + delay_seconds * 1000 if delay_seconds else 0,
            max_attempts=budget,
            idempotency_key=idempotency_key,
        )
        archived = (
            [self.archive.write(qd.host, qd.queue, task.id, "item", item)]
            if settings.archive_payloads
            else []
        )
        prior = posting.write_new(qd, task, fsync=self.fsync)
        if prior is not None:
            return PostResult(task=prior, replayed=True)
        self.note_pending(qd, task)
        self.log.append(task, "posted", now=now, archived=archived)
        return PostResult(task=task, replayed=False)

    def read(self, host: str, queue: str, task_id: str) -> Task:
        """The task as it stands (the highest rev of its copies). Never stamps anything."""
        paths.validate_task_id(task_id)
        return copies.winner(self.dirs(host, queue), task_id).task

    def fetch(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        now: int | None = None,
        current: Task | None = None,
    ) -> Task:
        """The producer's read: the first read of a terminal result sets fetchedAt.

        `current`: the task as the caller has just read it, which spares a second read of
        every copy; the stamp itself still re-reads the record under its lock."""
        task = self.read(host, queue, task_id) if current is None else current
        if not task.status.terminal or task.fetched_at is not None:
            return task
        now = now_ms(now)
        qd = self.dirs(host, queue)
        with copies.locked(qd, task_id) as found:
            task = found.task
            if not task.status.terminal or task.fetched_at is not None:
                return task  # someone else stamped (or retried) it first
            new = task.replace(fetched_at=now)
            return self.apply(qd, found.directory, task, new, "fetched", now=now)

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
        """Newest first by (postedAt, id); reads only the page's records (listing_index.py)."""
        wanted = State(status) if status is not None else None
        return self.listings.page(
            self.dirs(host, queue), status=wanted, posted_by=posted_by, limit=limit, offset=offset
        )

    def cancel(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
    ) -> Task:
        """pending -> cancelled; processing -> cancelRequested; terminal -> NotCancellable."""
        now = now_ms(now)
        qd = self.dirs(host, queue)
        with copies.locked(qd, paths.validate_task_id(task_id)) as found:
            task = found.task
            if task.status is State.PENDING:
                new = task.replace(status=State.CANCELLED, updated_at=now, finished_at=now)
                return self.apply(qd, found.directory, task, new, "cancelled", now=now)
            if task.status is State.PROCESSING:
                if task.cancel_requested:
                    return task
                new = task.replace(cancel_requested=True, updated_at=now)
                return self.apply(qd, found.directory, task, new, None, now=now)
            raise NotCancellable()

    def retry(
        self,
        host: str,
        queue: str,
        task_id: str,
        *,
        settings: QueueSettings,
        now: int | None = None,
    ) -> Task:
        """failed or cancelled -> pending, with a fresh attempt budget."""
        now = now_ms(now)
        qd = self.dirs(host, queue)
        with copies.locked(qd, paths.validate_task_id(task_id)) as found:
            task = found.task
            if task.status not in (State.FAILED, State.CANCELLED):
                raise NotRetryable()
            budget = settings.attempt_budget()
            new = task.replace(
                status=State.PENDING,
                updated_at=now,
                lease=None,
                progress=None,
                result=None,
                error=None,
                finished_at=None,
                fetched_at=None,
                cancel_requested=False,
                available_at=0,
                max_attempts=task.attempts + budget if budget else 0,
                last_error=task.result if task.result is not None else task.error,
            )
            return self.apply(qd, found.directory, task, new, "retried", now=now)

    def wait_for_change(
        self, host: str, queue: str, task_id: str, *, since: int, wait_seconds: float
    ) -> Task:
        """Return as soon as the task's updatedAt differs from `since`, or when the wait ends."""
        qd = self.dirs(host, queue)
        # Every change of state renames the task's file into one of its queue's state dirs.
        # (A task deleted meanwhile, by retention, is answered when the wait ends: not found.)
        dirs = [qd.proc_path(directory) for directory in paths.STATE_DIRS]
        # Only this task's own name: every other task's transition in the queue used to wake
        # each waiting read into a read of all its copies.
        name = paths.task_file(task_id)
        deadline = time.monotonic() + wait_seconds
        with watcher().channel(dirs, arrivals(), wanted=name.__eq__) as channel:
            while True:
                generation = channel.generation
                task = self.read(host, queue, task_id)
                remaining = deadline - time.monotonic()
                if task.updated_at != since or remaining <= 0:
                    return task
                channel.wait(generation, remaining)

    def stats(self, host: str, queue: str, *, now: int | None = None) -> QueueStats:
        """Counts from listings and the pending index; no record is read twice."""
        now = now_ms(now)
        qd = self.dirs(host, queue)
        with self.lock:
            entries = list(self.index(qd).entries.values())
        counts = {
            d: sum(1 for e in os.scandir(qd.fd(d)) if paths.task_id_of(e.name))
            for d in ("processing", "done")
        }
        return QueueStats(
            pending=len(entries),
            processing=counts["processing"],
            done=counts["done"],
            delayed=sum(1 for e in entries if e[2] > now and not e[3]),
            retrying=sum(1 for e in entries if e[2] > now and e[3]),
            oldest_pending_ms=max((now - min(e[1] for e in entries)), 0) if entries else 0,
        )

    # -- workers: claim, progress, finish, fail live in working.py --------------------------

    claim = working.claim
    wait_claim = working.wait_claim
    progress = working.progress
    finish = working.finish
    fail = working.fail


def _close(
    root_fd: int, dirs: dict[tuple[str, str], QueueDirs], log: EventLog, listings: ListingIndexes
) -> None:
    listings.close()
    for qd in dirs.values():
        qd.close()
    dirs.clear()
    log.close()
    os.close(root_fd)


__all__ = ["InvalidRequest", "NotFound", "QueueStore", "files", "now_ms"]
