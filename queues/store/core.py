"""QueueCore: what every verb of the store shares, and the one place that changes a record.

It holds the configuration, the items root, the queues it keeps open (each one's directories and
pending index, openqueues.py, and the lock that guards them, never a disk write), the listing
indexes of the open queues listed most recently, the event log and the payload archive. A verb
holds a queue for as long as it uses its directories: `with core.queue_dirs(host, queue) as qd:`.
Every record written and every task's event line goes through `admit` (a new task), `apply` (a
change) or `remove` (retention's delete), each checked against the transition table before
anything is written. It knows nothing of the verbs: producing, operating, claiming, working,
listing and sweep hold them, as functions that take a QueueCore first; QueueStore (store.py) is
their public face.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from . import copies, dependencies, files, groups, paths, posting, spares
from .archive import PayloadArchive
from .background import Background
from .dircount import DirCounts
from .done_records import DoneRecords
from .due_index import DueIndexes
from .errors import StorageUnavailable
from .eventlog import NO_REASON, Because, EventLog, LinesRefused
from .index import PendingIndex
from .inotify import changes, sweep_changes
from .listing_index import ListingIndexes
from .openqueues import OpenQueues
from .paths import QueueDirs
from .records import State, Task, check_transition
from .rules import Change
from .settings import QueueSettings, StoreConfig
from .spool import Spool


class QueueCore:
    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        files.use_umask(config.umask)  # before anything of the store is created
        self.root_fd = paths.open_root(config.items_dir)
        try:
            flush = files.flush_for(config.flush, self.root_fd)
        except BaseException:
            os.close(self.root_fd)
            raise
        # this store's own way to flush, carried to each of its writes: False, or its Flush
        self.fsync: files.Durable = flush if config.fsync else False
        spool = Spool(config.items_dir, fsync=self.fsync)  # on the items disk, not the logs'
        self.log = EventLog(config.logs_dir, fsync=self.fsync, spool=spool)
        self.archive = PayloadArchive(config.logs_dir, fsync=self.fsync)
        self.lock = threading.RLock()  # guards the open queues and indexes, never a disk write
        # a queue's listing index and its directory counts are used only while the queue is
        # held, and go when it closes
        self.listings = ListingIndexes(changes)
        self.dir_counts = DirCounts(changes)
        # what the sweep read of done records, kept across its passes (not per open queue)
        self.done_records = DoneRecords()
        # when each thing of a queue falls due, for the sweep's later passes (due_index.py)
        self.due = DueIndexes(sweep_changes)
        self._queues = OpenQueues(
            self.root_fd,
            limit=config.open_queues,
            fsync=self.fsync,
            lock=self.lock,
            on_close=self._closed,
        )
        # the releases of dependents an ending's request handed on (dependencies.py)
        self.releases: Background[dependencies.Later] = Background(
            functools.partial(dependencies.release_later, self), name="taskhoster-release"
        )
        self._finalizer = weakref.finalize(self, _close, self.root_fd, self._queues, self.log)

    def close(self) -> None:
        self.releases.wait()  # they use the queues' directories, closed next
        with self.lock:
            self._finalizer()

    def _closed(self, host: str, queue: str) -> None:
        self.listings.drop(host, queue)
        self.dir_counts.drop(host, queue)
        self.due.drop(host, queue)

    # -- places -----------------------------------------------------------------------------

    def queue_dirs(
        self, host: str, queue: str, *, create: bool = False
    ) -> AbstractContextManager[QueueDirs]:
        """Hold a queue's directories for the block (NotFound if it does not exist and not
        `create`); at most `config.open_queues` that nobody holds stay open."""
        return self._queues.hold(host, queue, create=create)

    def open_queues(self) -> list[tuple[str, str]]:
        with self.lock:
            return self._queues.keys()

    def index(self, qd: QueueDirs, *, read: bool = True) -> PendingIndex:
        """The fresh pending index of a held queue; call with self.lock held (read False: the
        caller has just read the process's inotify queue, as the flow gate does)."""
        idx = self._queues.index(qd)
        idx.refresh(read=read)
        return idx

    def pending_count(self, qd: QueueDirs) -> int:
        """How many tasks pending/ holds, exactly: the index refreshed now (inotify's names are
        queued by the renames that made them, so every post finished before this is in); call
        with self.lock held."""
        idx = self._queues.index(qd)
        idx.refresh(exact=True)
        return idx.count()

    def note_pending(self, qd: QueueDirs, task: Task) -> None:
        """Our own write into pending/ reaches the index now; inotify brings other processes'."""
        with self.lock:
            idx = self._queues.known_index(qd)
            if idx is not None:
                idx.add(task)

    def queues(self) -> list[tuple[str, str]]:
        return paths.list_queues(self.root_fd)

    # -- the one place that writes records and logs them --------------------------------------

    def admit(
        self,
        qd: QueueDirs,
        task: Task,
        *,
        now: int,
        settings: QueueSettings,
        because: Because = NO_REASON,
    ) -> Task | None:
        """Write a new pending task, then its `posted` line. With an Idempotency-Key already
        used for the same item, write nothing and return the task that key made."""
        check_transition(task.id, None, task.status, "posted")
        if task.idempotency_key is not None:
            prior = posting.settle_key(qd, task, fsync=self.fsync)
            if prior is not None:
                return prior
        # Archived once the id is surely this task's (a replay archives nothing), and before
        # the task is written, so that a post that fails here has posted nothing.
        with self._keys_back_on_failure(qd, [task]):
            archived = (
                [self.archive.write(qd.host, qd.queue, task.id, "item", task.item)]
                if settings.archive_payloads
                else []
            )
            # a keyed task's file is flushed before its line: its key is durable already, and
            # must never name a torn file
            posting.write_task(qd, task, fsync=self._closed_by_line([task]))
        self.note_pending(qd, task)
        try:
            self.log.append(task, "posted", now=now, archived=archived, because=because)
        except StorageUnavailable:
            # neither the day-file nor the spool took the line: the post is answered 503, so
            # it must not stand, unless a claim took the task first (then it happened)
            if self._withdraw(qd, task):
                raise
        return None

    @contextlib.contextmanager
    def _keys_back_on_failure(self, qd: QueueDirs, tasks: list[Task]) -> Iterator[None]:
        """The keys these tasks' post just made its own are removed again when the block fails
        before the tasks are written (the archive refused their items, say): a key left so
        would complete its task from the key at the next post with it, a task without its
        `posted` line or archive, for a post that was answered 503. A task written all the
        same (a flush failed after its rename) keeps its key: a retry answers it."""
        try:
            yield
        except BaseException:
            for task in tasks:
                with contextlib.suppress(OSError, StorageUnavailable):
                    if not copies.exists(qd, task.id):
                        posting.remove_key(qd, task, fsync=self.fsync)
            raise

    def _withdraw(self, qd: QueueDirs, task: Task) -> bool:
        """Take back a task just written into pending/ (posting.withdraw_task): whether it is
        gone; False when a claim took it first, and the post stands."""
        withdrawn = posting.withdraw_task(qd, task, fsync=self.fsync)
        if withdrawn:
            with self.lock:
                idx = self._queues.known_index(qd)
                if idx is not None:
                    idx.forget(task.id)
        return withdrawn

    def admit_many(
        self, qd: QueueDirs, tasks: list[Task], *, now: int, settings: QueueSettings
    ) -> list[Task | None]:
        """admit() for a batch, in order: the prior task of each entry whose Idempotency-Key
        was used already (None for a new task). The keys share one fsync of their directory,
        the tasks one of pending/, and their `posted` lines one write and one flush."""
        for task in tasks:
            check_transition(task.id, None, task.status, "posted")
        keyed = [(i, task) for i, task in enumerate(tasks) if task.idempotency_key is not None]
        posting.check_keys(qd, keyed)  # before anything of the batch is written
        priors = posting.settle_keys(qd, keyed, fsync=self.fsync) if keyed else {}
        new = [task for task in tasks if task.id not in priors]
        with self._keys_back_on_failure(qd, new):
            archived = {
                task.id: [self.archive.write(qd.host, qd.queue, task.id, "item", task.item)]
                if settings.archive_payloads
                else []
                for task in new
            }
            posting.write_tasks(qd, new, fsync=self._closed_by_line(new))
        for task in new:
            self.note_pending(qd, task)
        try:
            self.log.append_many(
                [(task, "posted", None, archived[task.id]) for task in new], now=now
            )
        except StorageUnavailable as exc:
            # as admit(); a task a claim took first stays posted (store.md: both disks failing),
            # and so does one whose `posted` line was written whole before the disk filled
            # (LinesRefused: a reader may have read it)
            standing = exc.standing if isinstance(exc, LinesRefused) else 0
            for task in new[standing:]:
                self._withdraw(qd, task)
            raise
        return [priors.get(task.id) for task in tasks]

    def _closed_by_line(self, tasks: list[Task]) -> files.Durable:
        """How a post's task files are flushed: by the one flush of their `posted` lines
        (files.deferred), unless one of them is keyed."""
        if any(task.idempotency_key is not None for task in tasks):
            return self.fsync
        return files.deferred(self.fsync)

    def apply_many(
        self,
        qd: QueueDirs,
        changes: list[Change],
        *,
        now: int,
        worker: str | None,
        settings: QueueSettings | None,
        may_spool: bool = True,
        flush: bool = True,
    ) -> list[Task]:
        """apply() for a batch of changes of locked tasks: the records are written content
        first (copies.commit_many), then every event line in one write, and one flush makes
        all of it durable (`may_spool`: EventLog.append_many); only then do the copies the
        moves left go. `flush` False: nothing is flushed (a claim: store.md, fourth version)."""
        for change in changes:
            check_transition(change.new.id, change.old.status, change.new.status, change.event)
        archived = [
            [self._archive(c.new, c.event, kind, body) for kind, body in c.archive.items()]
            if settings is not None and settings.archive_payloads
            else []
            for c in changes
        ]
        fsync = files.deferred(self.fsync) if flush else False
        left = copies.commit_many(
            qd,
            [(c.source, c.new) for c in changes],
            fsync=fsync,
            keep=not flush and spares.kept_by(self.fsync),  # a claim's pending records
        )
        for change in changes:
            if change.new.status is State.PENDING:
                self.note_pending(qd, change.new)
        lines = [
            (c.new, c.event, worker, done)
            for c, done in zip(changes, archived, strict=True)
            if c.event is not None
        ]
        self.log.append_many(lines, now=now, may_spool=may_spool, flush=flush)
        if flush and not lines:
            files.flush_items(self.fsync)
        copies.retire(qd, left, fsync=fsync)
        ended = [c.new for c in changes if c.new.status.terminal and not c.old.status.terminal]
        if ended:
            dependencies.release_ended(self, ended, now=now)
            groups.note_ended(self, ended, now=now)
        return [change.new for change in changes]

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
        because: Because = NO_REASON,
    ) -> Task:
        """Check the table, archive bodies, write the new record over the copy in the directory
        `source`, then append the event line (`because`: its optional fields)."""
        check_transition(new.id, old.status, new.status, event)
        archived = []
        if settings is not None and settings.archive_payloads:
            archived = [
                self._archive(new, event, kind, body) for kind, body in (archive or {}).items()
            ]
        fsync = files.deferred(self.fsync)
        left = copies.commit(qd, source, new, fsync=fsync)
        if new.status is State.PENDING:
            self.note_pending(qd, new)
        if event is not None:
            self.log.append(new, event, now=now, worker=worker, archived=archived, because=because)
        else:
            files.flush_items(self.fsync)
        copies.retire(qd, left, fsync=fsync)
        if new.status.terminal and not old.status.terminal:
            dependencies.release_ended(self, [new], now=now)
            groups.note_ended(self, [new], now=now)
        return new

    def remove(
        self,
        qd: QueueDirs,
        task: Task,
        *,
        now: int,
        event: str = "cleaned",
        because: Because = NO_REASON,
    ) -> None:
        """Delete a terminal task, then its line: `cleaned` (its retention is over) or
        `deleted` (an operator's). Its archived payloads stay. The caller holds the task
        file's lock."""
        check_transition(task.id, task.status, None, event)
        if self.log.spool_dirty and not self.log.drain_spool():
            # a line of this task may still be spooled: its record stays until that is written
            raise StorageUnavailable("The event log has lines it could not write yet.")
        # the key goes first: a crash in between leaves a task without a key, never a key that
        # would bring a cleaned task back
        posting.remove_key(qd, task, fsync=self.fsync)
        # into the spares (a syncfs store with renameat2), where the next batch writes
        spares.retire(qd, qd.fd("done"), paths.task_file(task.id),
                      into_spares=spares.usable(files.deferred(self.fsync)))  # fmt: skip
        if self.fsync:
            files.sync_dir(qd.fd("done"), self.fsync)
        self.log.append(task, event, now=now, because=because)

    def quarantine(self, qd: QueueDirs, directory: str, task_id: str, *, now: int) -> bool:
        """Move a corrupt or symlinked file aside (never following it) and log it. No record is
        read, so no transition is checked; False if the file was gone already."""
        try:
            files.rename_aside(
                qd.fd(directory),
                paths.task_file(task_id),
                qd.fd(paths.QUARANTINE_DIR),
                f"{task_id}.{directory}.{now}",
            )
        except FileNotFoundError:
            return False
        self.log.quarantined(qd.host, qd.queue, task_id, now=now)
        return True

    def prune_logs(self, *, now: int) -> int:
        return self.log.prune(now=now, retain_days=self.config.log_retain_days)

    def _archive(self, task: Task, event: str | None, kind: str, body: Any) -> str:
        if kind == "progress":
            return self.archive.append_progress(task.host, task.queue, task.id, body)
        assert event is not None, "a body is archived for the event that carries it"
        return self.archive.write_outcome(
            task.host, task.queue, task.id, kind, body, attempt=task.attempts, event=event
        )


def _close(root_fd: int, queues: OpenQueues, log: EventLog) -> None:
    queues.close()  # and with each queue, its listing index and directory counts
    log.close()
    os.close(root_fd)
