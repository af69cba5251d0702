"""QueueCore: what every verb of the store shares, and the one place that changes a record.

It holds the configuration, the items root, each queue's directories and pending index (and the
lock that guards those caches, never a disk write), the event log and the payload archive. Every
record written and every task's event line goes through `admit` (a new task), `apply` (a change)
or `remove` (retention's delete), each checked against the transition table before anything is
written. It knows nothing of the verbs: producing, operating, claiming, working, listing and
sweep hold them, as functions that take a QueueCore first; QueueStore (store.py) is their public
face.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from . import copies, files, paths, posting
from .archive import PayloadArchive
from .eventlog import EventLog
from .index import PendingIndex
from .inotify import changes
from .listing_index import ListingIndexes
from .paths import QueueDirs
from .records import State, Task, check_transition
from .settings import QueueSettings, StoreConfig


class QueueCore:
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

    # -- the one place that writes records and logs them --------------------------------------

    def admit(self, qd: QueueDirs, task: Task, *, now: int, settings: QueueSettings) -> Task | None:
        """Write a new pending task, then its `posted` line. With an Idempotency-Key already
        used for the same item, write nothing and return the task that key made."""
        check_transition(task.id, None, task.status, "posted")
        archived = (
            [self.archive.write(qd.host, qd.queue, task.id, "item", task.item)]
            if settings.archive_payloads
            else []
        )
        prior = posting.write_new(qd, task, fsync=self.fsync)
        if prior is not None:
            return prior
        self.note_pending(qd, task)
        self.log.append(task, "posted", now=now, archived=archived)
        return None

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
        """Check the table, archive bodies, write the new record over the copy in the directory
        `source`, then append the event line."""
        check_transition(new.id, old.status, new.status, event)
        archived = []
        if settings is not None and settings.archive_payloads:
            archived = [
                self._archive(new, event, kind, body) for kind, body in (archive or {}).items()
            ]
        copies.commit(qd, source, new, fsync=self.fsync)
        if new.status is State.PENDING:
            self.note_pending(qd, new)
        if event is not None:
            self.log.append(new, event, now=now, worker=worker, archived=archived)
        return new

    def remove(self, qd: QueueDirs, task: Task, *, now: int) -> None:
        """Delete a terminal task (its retention is over), then its `cleaned` line. The caller
        holds the task file's lock."""
        check_transition(task.id, task.status, None, "cleaned")
        # the key goes first: a crash in between leaves a task without a key, never a key that
        # would bring a cleaned task back
        posting.remove_key(qd, task, fsync=self.fsync)
        files.unlink(qd.fd("done"), paths.task_file(task.id), fsync=self.fsync)
        self.log.append(task, "cleaned", now=now)

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


def _close(
    root_fd: int, dirs: dict[tuple[str, str], QueueDirs], log: EventLog, listings: ListingIndexes
) -> None:
    listings.close()
    for qd in dirs.values():
        qd.close()
    dirs.clear()
    log.close()
    os.close(root_fd)
