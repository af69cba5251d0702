"""The sweep: queue timeout, then lease timeout, then retention, over every live queue.

It also reconciles what a crash can leave behind (two copies of a task: the highest rev wins,
the others are deleted; stale temp files; idempotency keys whose task never appeared) and
quarantines corrupt or symlinked task files. Every
change locks the task file first (without waiting), so it is safe beside any number of API calls
and other sweeps; one `sweep_all` runs at a time under a non-blocking flock at the items root.
Its functions take the QueueCore; QueueStore's module gives them their public face.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields

import orjson

from . import copies, dependencies, files, groups, paths, rules, spares, strays
from .clock import now_ms
from .core import QueueCore
from .due_index import KEY, TASK, TEMP, DueIndex, Item
from .errors import CorruptRecord, StorageUnavailable, StoreError
from .eventlog import NO_REASON, Because
from .paths import QueueDirs
from .records import Task
from .rules import verdict
from .settings import QueueSettings

logger = logging.getLogger("taskhoster.sweep")

# How a pass names a queue's unforeseen failure among its errors (the chaos run looks for it).
UNFORESEEN = "the sweep failed"
STALE_TEMP_MS = 60_000  # a temp file (or a key without its task) this old: its writer died
# The items or logs disk refusing now (read-only, full, failing, over quota): a condition of the
# pass, said in one line, never a queue's unforeseen failure with its traceback.
STORAGE_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EIO, errno.EDQUOT})


@dataclass
class SweepReport:
    skipped: bool = False  # another sweep held the lock
    queues: int = 0
    timeout: int = 0
    requeue: int = 0
    failed: int = 0  # lapsed leases past the attempt budget
    cancelled: int = 0  # lapsed leases of tasks whose cancel was requested
    cleaned: int = 0
    reconciled: int = 0  # losing copies deleted
    quarantined: int = 0
    temp_removed: int = 0
    keys_removed: int = 0  # idempotency keys whose task never appeared
    logs_pruned: int = 0
    errors: list[str] = field(default_factory=list)
    # what the disks refused this pass (an errno's text each): one line in `errors` at its end
    storage_faults: set[str] = field(default_factory=set)

    def add(self, other: SweepReport) -> None:
        for f in fields(self):
            if f.type == "int":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        self.errors += other.errors
        self.storage_faults |= other.storage_faults

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.type == "int"}


def sweep_queue(
    core: QueueCore, host: str, queue: str, settings: QueueSettings, *, now: int
) -> SweepReport:
    with core.queue_dirs(host, queue) as qd:
        return _sweep(core, qd, settings, now)


def _sweep(core: QueueCore, qd: QueueDirs, settings: QueueSettings, now: int) -> SweepReport:
    due = core.due.of(qd)
    with due.lock:
        changed = due.follow(settings)
        try:
            if changed is None:
                due.whole(settings)
                report = _whole(core, qd, settings, now, due)
            else:
                report = _follow(core, qd, settings, now, due, changed)
        except BaseException:
            due.lost()  # what the pass did not reach is looked at by the next one, listing
            raise
        if report.storage_faults:  # a block the disk cut short may have left things unnoted
            due.lost()
        return report


def _whole(
    core: QueueCore, qd: QueueDirs, settings: QueueSettings, now: int, due: DueIndex
) -> SweepReport:
    """A pass that lists every directory and judges every task (the first of a process, and
    any after lost events); what it learns, when each thing falls due, goes into `due`."""
    report = SweepReport(queues=1)
    with _storage_faults_noted(report):  # the time rules after it matter more
        _remove_temps(qd, now, report, due)
    listed = {d: _list(qd, d) for d in paths.STATE_DIRS}
    with _storage_faults_noted(report):
        _remove_orphan_keys(qd, listed, now, report, due)
    _sweep_waiters_and_groups(core, qd, now, report)
    with core.lock:
        index = core.index(qd)
        known, waiting = dict(index.entries), index.waiting_ids()
    done_fd, learned = qd.fd("done"), core.done_records
    learned.keep_only(qd.host, qd.queue, listed["done"])
    for task_id in sorted(set().union(*listed.values())):
        where = [d for d in paths.STATE_DIRS if task_id in listed[d]]
        # The index knows postedAt, and the window starts there or later (at a retry): a task
        # fresh by its postedAt is fresh; any other is read, and judged by its window_start.
        fresh = task_id in known and now - known[task_id][1] <= settings.queue_seconds * 1000
        if where == ["pending"] and (fresh or task_id in waiting):
            # a waiting task has no rule to meet (rules.verdict): its release rewrites it
            looked = known[task_id][1] + settings.queue_seconds * 1000 + 1 if fresh else None
            due.at((TASK, "", task_id), looked)
            continue
        if where == ["done"] and learned.not_due(done_fd, qd.host, qd.queue, task_id,
                                                 settings, now):  # fmt: skip
            # read at an earlier pass, unchanged since, and kept yet (done_records.py)
            due.at((TASK, "", task_id), learned.retention_ends(qd.host, qd.queue, task_id,
                                                               settings))  # fmt: skip
            continue
        _judge(core, qd, task_id, where, settings, now, report, due)
    with _storage_faults_noted(report):  # after retention, which retires into the spares
        spares.trim(qd)
    return report


def _follow(
    core: QueueCore,
    qd: QueueDirs,
    settings: QueueSettings,
    now: int,
    due: DueIndex,
    changed: dict[str, dict[str, bool | int]],
) -> SweepReport:
    """A pass that looks only at the names inotify says changed since the last pass and at
    what fell due by `now` (due_index.py)."""
    report = SweepReport(queues=1)
    looks: set[Item] = set(due.fallen_due(now))
    for directory, names in changed.items():
        for name in names:
            task_id = paths.task_id_of(name) if directory != paths.KEYS_DIR else None
            if task_id is not None:
                looks.add((TASK, "", task_id))
            elif name.startswith(files.TEMP_PREFIX):
                looks.add((TEMP, directory, name))
            elif directory == paths.KEYS_DIR:
                looks.add((KEY, directory, name))
    for kind, directory, name in sorted(looks):
        due.forget((kind, directory, name))
    with _storage_faults_noted(report):
        for kind, directory, name in sorted(looks):
            if kind == TEMP:
                _check_temp(qd, directory, name, now, report, due)
    with _storage_faults_noted(report):
        for kind, _, name in sorted(looks):
            if kind == KEY:
                _check_key(qd, name, None, now, report, due)
    _sweep_waiters_and_groups(core, qd, now, report)
    for kind, _, task_id in sorted(looks):
        if kind == TASK:
            where = [d for d in paths.STATE_DIRS if _present(qd, d, task_id)]
            if where:
                _judge(core, qd, task_id, where, settings, now, report, due)
                continue
            # gone from every directory: a key it left (its file deleted by hand) is an orphan
            key = due.key_of_task.pop(task_id, None)
            if key is not None:
                with _storage_faults_noted(report):
                    _check_key(qd, key, None, now, report, due)
    # moves and retention retire records into the spares between passes, and a claim takes
    # none back: every pass holds the pool to its bound (one listing of spare/)
    with _storage_faults_noted(report):
        spares.trim(qd)
    return report


def _sweep_waiters_and_groups(
    core: QueueCore, qd: QueueDirs, now: int, report: SweepReport
) -> None:
    """What costs the queue's awaited tasks and open groups, not its tasks: every pass."""
    with _storage_faults_noted(report):  # a release an ending crashed before
        dependencies.sweep_dependents(core, qd, now=now)
    with _storage_faults_noted(report):  # a group's count or callback an ending crashed before
        groups.sweep_groups(core, qd, now=now)


def _judge(
    core: QueueCore,
    qd: QueueDirs,
    task_id: str,
    where: list[str],
    settings: QueueSettings,
    now: int,
    report: SweepReport,
    due: DueIndex,
) -> None:
    """Read the task's copies, keep the best, apply the rules to it, and note when to look
    again: when its next rule can fire, or at the next pass if one fired (its change is
    looked at then) or could not be made now (a worker held it)."""
    # A disk refusing one task's change may still allow the next one's (a full disk still
    # deletes: retention goes on while a requeue's write is refused).
    due.at((TASK, "", task_id), now + 1)  # until judged: a fault below leaves it to the next pass
    with _storage_faults_noted(report):
        best = _settle(core, qd, task_id, where, now, report)
        if best is None:
            return
        if where == ["done"]:
            core.done_records.learn(qd.host, qd.queue, best.task, best.opened)
        _apply_rules(core, qd, best, settings, now, report)
        looked = rules.next_due(best.directory, best.task, settings)
        due.at((TASK, "", task_id), None if looked is None else max(looked, now + 1))


def _present(qd: QueueDirs, directory: str, task_id: str) -> bool:
    """Whether the directory has an entry under the task's name (whatever it is: _settle
    quarantines what is no record)."""
    try:
        os.stat(paths.task_file(task_id), dir_fd=qd.fd(directory), follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def storage_fault(exc: BaseException) -> str | None:
    """The text of the storage fault `exc` is (or was raised from), or None if it is none."""
    seen: BaseException | None = exc
    for _ in range(8):  # a short chain, and it can loop: files re-raises an OSError from itself
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in STORAGE_ERRNOS:
            return seen.strerror or os.strerror(seen.errno)
        seen = seen.__cause__
    return None


@contextlib.contextmanager
def _storage_faults_noted(report: SweepReport) -> Iterator[None]:
    """Note a storage fault of the block in `report` and go on after it."""
    try:
        yield
    except (StorageUnavailable, OSError) as exc:
        fault = storage_fault(exc)
        if fault is None:
            raise  # not the disk's (a key that kept changing): the queue's error, as before
        report.storage_faults.add(fault)


def _list(qd: QueueDirs, directory: str) -> set[str]:
    return {i for e in os.scandir(qd.fd(directory)) if (i := paths.task_id_of(e.name))}


def _remove_temps(qd: QueueDirs, now: int, report: SweepReport, due: DueIndex) -> None:
    for directory in (*paths.STATE_DIRS, paths.KEYS_DIR):
        for entry in os.scandir(qd.fd(directory)):
            if entry.name.startswith(files.TEMP_PREFIX):
                _check_temp(qd, directory, entry.name, now, report, due)


def _check_temp(
    qd: QueueDirs, directory: str, name: str, now: int, report: SweepReport, due: DueIndex
) -> None:
    """Remove a temp file whose writer died (older than STALE_TEMP_MS); note a younger one's
    time."""
    fd = qd.fd(directory)
    # A temp is renamed to its task's name the moment its write is done: one listed a moment
    # ago may be gone by its stat, or by its unlink. Either way its writer finished after all.
    with contextlib.suppress(FileNotFoundError):
        found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        # The store's temps are regular files: anything else under such a name (a directory
        # left by hand, a FIFO) is not one of ours to remove, nor a reason to fail the pass.
        if not stat.S_ISREG(found.st_mode):
            return
        if found.st_mtime * 1000 < now - STALE_TEMP_MS:
            files.unlink(fd, name, fsync=False)
            report.temp_removed += 1
        else:
            due.at((TEMP, directory, name), _stale_at(found))


def _stale_at(found: os.stat_result) -> int:
    """The first millisecond at which a file with this mtime is older than STALE_TEMP_MS."""
    return -(-found.st_mtime_ns // 1_000_000) + STALE_TEMP_MS + 1


def _remove_orphan_keys(
    qd: QueueDirs, listed: dict[str, set[str]], now: int, report: SweepReport, due: DueIndex
) -> None:
    """Remove the keys whose task never appeared: a keyed post writes its key, then its task,
    and one that crashed in between left a key that would answer every replay with nothing."""
    for entry in os.scandir(qd.fd(paths.KEYS_DIR)):
        if not entry.name.startswith(files.TEMP_PREFIX):
            _check_key(qd, entry.name, listed, now, report, due)


def _check_key(
    qd: QueueDirs,
    name: str,
    listed: dict[str, set[str]] | None,
    now: int,
    report: SweepReport,
    due: DueIndex,
) -> None:
    """Remove one key if its task never appeared; note a younger key's time, and a kept key's
    task (its key is looked at again when the task goes from every directory).

    A poster may be between its two writes right now, so only a key older than STALE_TEMP_MS
    goes, and only if its task is in no state directory: not in the listing taken before (which
    meets a task moving forward, pending to processing to done, in the order it lists; a pass
    without a listing looks in that order now) nor on a look now in the other order (which
    meets one moving back: a retry or a requeue writes its pending/ copy before it unlinks the
    other). The key is removed, not completed from its record: the post that wrote it was never
    acknowledged, and a client that retries with the same key makes a new task."""
    keys = qd.fd(paths.KEYS_DIR)
    try:
        found = os.stat(name, dir_fd=keys, follow_symlinks=False)
        if not stat.S_ISREG(found.st_mode):
            if paths.is_key_file(name):  # planted under a key's name: moved aside
                strays.move_aside(qd, keys, name, paths.KEYS_DIR)
            return  # any other name is no business of the store's
        if found.st_mtime * 1000 >= now - STALE_TEMP_MS:
            due.at((KEY, paths.KEYS_DIR, name), _stale_at(found))
            return
        task_id = _task_of_key(files.read_at(keys, name))
    except FileNotFoundError:
        return  # removed since the listing, with its cleaned task
    except files.NotRegularFile:
        return  # replaced by something else than a key since the listing: not ours
    if task_id is not None:
        if listed is not None:
            seen = any(task_id in ids for ids in listed.values())
        else:
            seen = any(_present(qd, d, task_id) for d in paths.STATE_DIRS)
        if seen or copies.exists(qd, task_id):
            due.key_of_task[task_id] = name
            return
    with contextlib.suppress(FileNotFoundError):
        if os.stat(name, dir_fd=keys, follow_symlinks=False).st_ino != found.st_ino:
            return  # replaced since it was listed: a new post's key
        # no fsync: a key brought back by a power cut is still without its task, and goes
        # at the next sweep
        files.unlink(keys, name, fsync=False)
        report.keys_removed += 1


def _task_of_key(data: bytes) -> str | None:
    """The id a key names; None for a key that is not one of ours (not JSON, or no task id in
    it): it names no task, and it would fail every post with its key, so it goes too."""
    try:
        task_id = orjson.loads(data).get("id")
    except (ValueError, AttributeError):  # orjson's JSONDecodeError is a ValueError
        return None
    return task_id if isinstance(task_id, str) and paths.task_id_of(task_id + ".json") else None


def _settle(
    core: QueueCore, qd: QueueDirs, task_id: str, where: list[str], now: int, report: SweepReport
) -> copies.Copy | None:
    """Read every copy; quarantine corrupt ones; delete all but the highest rev."""
    found = []
    for directory in where:
        try:
            read = copies.read_found(qd, directory, task_id)
        except CorruptRecord:
            _quarantine(core, qd, directory, task_id, now, report)
            continue
        if read is not None and copies.belongs(qd, task_id, read.task):
            found.append(read)
        elif read is not None:  # a record under another id's name, or another queue's
            _quarantine(core, qd, directory, task_id, now, report)
    if not found:
        return None
    found.sort(key=lambda c: (c.task.rev, copies.PRECEDENCE[c.directory]), reverse=True)
    for loser in found[1:]:
        if _locked_unlink(core, qd, loser):
            report.reconciled += 1
    return found[0]


def _locked_unlink(core: QueueCore, qd: QueueDirs, c: copies.Copy) -> bool:
    """Delete a copy unless someone holds it or changed it since we read it."""
    fd = _try_lock(qd, c)
    if fd is None:
        return False
    try:
        files.unlink(qd.fd(c.directory), paths.task_file(c.task.id), fsync=core.fsync)
        return True
    finally:
        os.close(fd)


def _try_lock(qd: QueueDirs, c: copies.Copy) -> int | None:
    """The copy's lock, if it is still the copy read: None when it went, was rewritten, or was
    replaced by something that is no record since (the next pass meets that)."""
    try:
        fd = files.lock_at(qd.fd(c.directory), paths.task_file(c.task.id), block=False)
    except OSError as exc:
        if files.gone_or_not_a_task_file(exc):
            return None
        raise
    if fd is None:
        return None
    try:
        same = copies.parse(files.read_fd(fd)).rev == c.task.rev
    except CorruptRecord:
        same = False
    except BaseException:
        os.close(fd)
        raise
    if not same:
        os.close(fd)
        return None
    return fd


def _quarantine(
    core: QueueCore, qd: QueueDirs, directory: str, task_id: str, now: int, report: SweepReport
) -> None:
    if core.quarantine(qd, directory, task_id, now=now):
        report.quarantined += 1


def _apply_rules(
    core: QueueCore,
    qd: QueueDirs,
    best: copies.Copy,
    settings: QueueSettings,
    now: int,
    report: SweepReport,
) -> None:
    found = verdict(best.directory, best.task, settings, now)
    if found == "cleaned":
        report.cleaned += _clean(core, qd, best, now)
        return
    change = None if found is None else rules.plan_sweep(found, best.task, best.directory, now=now)
    if change is None:
        return
    assert change.event is not None
    done = _change(core, qd, best, change.new, change.event, now, settings,
                   archive=change.archive or None, because=change.because)  # fmt: skip
    if found == "timeout":
        report.timeout += 1  # counted as decided, as it always was
    else:
        counter = {"cancelled": "cancelled", "failed": "failed"}.get(change.event, "requeue")
        setattr(report, counter, getattr(report, counter) + done)


def _change(
    core: QueueCore,
    qd: QueueDirs,
    best: copies.Copy,
    new: Task,
    event: str,
    now: int,
    settings: QueueSettings,
    archive: dict[str, str] | None = None,
    because: Because = NO_REASON,
) -> bool:
    fd = _try_lock(qd, best)
    if fd is None:
        return False  # a worker or another sweep is changing it: next sweep
    try:
        worker = best.task.lease.worker if best.task.lease else None
        core.apply(
            qd,
            best.directory,
            best.task,
            new,
            event,
            now=now,
            worker=worker,
            archive=archive,
            settings=settings,
            because=because,
        )
        return True
    finally:
        os.close(fd)


def _clean(core: QueueCore, qd: QueueDirs, best: copies.Copy, now: int) -> bool:
    fd = _try_lock(qd, best)
    if fd is None:
        return False
    try:
        core.remove(qd, best.task, now=now)
    finally:
        os.close(fd)
    return True


def unexpected(host: str, queue: str, exc: Exception) -> str:
    """Log a queue's unforeseen failure with its traceback and say it in one line: one odd
    file in one queue must not stop the timeouts and lease lapses of every other queue."""
    logger.exception("sweep: %s/%s failed; the other queues are swept all the same", host, queue)
    return f"{host}/{queue}: {UNFORESEEN} ({type(exc).__name__}: {exc}); see the log"


def sweep_all(
    core: QueueCore,
    settings_for: Callable[[str, str], QueueSettings | None],
    *,
    now: int | None = None,
) -> SweepReport:
    """Sweep every queue on disk that has settings; skipped if another sweep is running.

    A disk that refuses (read-only, full, failing) is one line among the pass's errors, the
    same line each pass while it lasts: the pass does what the disks still allow, and the next
    pass tries the rest again."""
    now = now_ms(now)
    report = SweepReport()
    lock = _sweep_lock(core, report)
    try:
        if lock is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return SweepReport(skipped=True)
        with _storage_faults_noted(report):
            core.log.drain_spool()  # lines the logs disk refused (spool.py), before this pass's
        with _storage_faults_noted(report):
            for host, queue in core.queues():
                settings = settings_for(
                    host, queue
                )  # a database gone ends the pass: the loop says so
                if settings is None:
                    continue  # not a configured queue: leave its files alone
                _sweep_one(core, host, queue, settings, now, report)
        with _storage_faults_noted(report):
            report.logs_pruned = core.prune_logs(now=now)
        if report.storage_faults:
            report.errors.append(storage_line(report.storage_faults))
        return report
    finally:
        if lock is not None:
            os.close(lock)


def storage_line(faults: set[str]) -> str:
    return (
        f"sweep: the store's disks refuse ({'; '.join(sorted(faults))}); "
        "what they refused is tried again at the next pass"
    )


def _sweep_one(
    core: QueueCore, host: str, queue: str, settings: QueueSettings, now: int, report: SweepReport
) -> None:
    try:
        with _storage_faults_noted(report):
            report.add(sweep_queue(core, host, queue, settings, now=now))
    except StoreError as exc:
        report.errors.append(f"{host}/{queue}: {exc.detail}")
    except Exception as exc:
        report.errors.append(unexpected(host, queue, exc))


def _sweep_lock(core: QueueCore, report: SweepReport) -> int | None:
    """The descriptor of the items root's sweep lock; None when a read-only or failing disk
    cannot give one. The pass then goes on unlocked: each change still locks its task file,
    so two sweeps at once only do the same work twice (and a read-only disk allows none)."""
    try:
        return os.open(
            paths.SWEEP_LOCK,
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            files.FILE_MODE,
            dir_fd=core.root_fd,
        )
    except OSError as exc:
        fault = storage_fault(exc)
        if fault is None:
            raise
        report.storage_faults.add(fault)
    with contextlib.suppress(OSError):  # a read-only disk still opens (and flocks) it to read
        return os.open(
            paths.SWEEP_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=core.root_fd
        )
    return None
