"""Checks on a post, and writing a new task (with its Idempotency-Key, when it has one)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
from collections.abc import Iterator
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import orjson

from . import copies, files, names, paths, spares, strays
from .errors import (
    IdempotencyKeyReused,
    InvalidItem,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    QueueFull,
    StorageUnavailable,
    out_of_range,
)
from .paths import QueueDirs
from .records import Task
from .settings import QueueSettings


def check_size(which: str, body: Any, settings: QueueSettings) -> int:
    try:
        size = len(orjson.dumps(body))
    except TypeError as exc:  # e.g. an integer beyond 64 bits
        raise InvalidRequest(f"The {which} cannot be stored as JSON: {exc}.") from exc
    if size > settings.max_item_bytes:
        raise PayloadTooLarge(which, size, settings.max_item_bytes)
    return size


@functools.lru_cache(maxsize=256)
def _validator(schema_json: bytes) -> Any:
    schema = orjson.loads(schema_json)
    return jsonschema.validators.validator_for(schema)(schema)


def check_item(item: Any, settings: QueueSettings) -> None:
    if not isinstance(item, dict):
        raise InvalidItem("The item must be a JSON object.")
    check_size("item", item, settings)
    if settings.item_schema is not None:
        validator = _validator(orjson.dumps(settings.item_schema, option=orjson.OPT_SORT_KEYS))
        error = jsonschema.exceptions.best_match(validator.iter_errors(item))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(the item)"
            raise InvalidItem(
                f"The item does not match the queue's schema at {where}: {error.message}"
            )


def check_options(settings: QueueSettings, priority: Any, delay: Any, key: str | None) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not -100 <= priority <= 100:
        raise out_of_range("priority", priority, -100, 100)
    if (
        isinstance(delay, bool)
        or not isinstance(delay, int)
        or not 0 <= delay <= settings.queue_seconds
    ):
        raise out_of_range("delay", delay, 0, settings.queue_seconds, unit="seconds")
    if key is not None and not (
        isinstance(key, str)
        and 1 <= len(key) <= 255
        and key.isascii()
        and key.isprintable()
        and " " not in key
    ):
        raise InvalidRequest("Idempotency-Key must be 1 to 255 visible ASCII characters.")


MAX_CONCURRENCY_KEY = 200  # characters


def check_concurrency_key(key: Any) -> None:
    """A concurrency key is a name (names.py) of 1 to MAX_CONCURRENCY_KEY characters."""
    if key is not None:
        names.check_name("concurrencyKey", key, most=MAX_CONCURRENCY_KEY)


def check_room(pending: int, settings: QueueSettings, adding: int = 1) -> None:
    """Room for `adding` more pending tasks (a batch is admitted whole or not at all)."""
    if pending + adding > settings.max_pending:
        raise QueueFull(retry_after=max(1, min(settings.lease_seconds, 60)))


@contextlib.contextmanager
def posts_locked(qd: QueueDirs) -> Iterator[None]:
    """The queue's post lock, held across a capped post's count and its write, so posts from
    any number of threads and processes count one at a time and maxPending is never exceeded.

    An flock on pending/ itself, opened afresh: each open is its own lock holder, so threads of
    one process exclude each other too, and no lock file is added to the queue's layout. Only
    capped posts take it; retries and requeues into pending/ are not posts and are not capped."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=qd.fd("pending"))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and with it the lock


def item_hash(item: Any) -> str:
    return hashlib.sha256(orjson.dumps(item, option=orjson.OPT_SORT_KEYS)).hexdigest()


def settle_key(qd: QueueDirs, task: Task, *, fsync: files.Durable) -> Task | None:
    """Make the post's Idempotency-Key this task's, or return the task the key's first post
    made (None: the key is this task's now, and write_task comes next).

    The key is created exclusively (a no-replace rename), so two concurrent posts with one key
    make one task. It holds the whole record, so a key whose task is not written yet (its poster
    is between the two writes) is completed from the key rather than posted twice; one whose
    poster crashed there is removed by the sweep once it is older than a writer can be.
    """
    assert task.idempotency_key is not None
    keys = qd.fd(paths.KEYS_DIR)
    key_name = paths.key_file(task.posted_by, task.idempotency_key)
    key_data = orjson.dumps(
        {"id": task.id, "item": item_hash(task.item), "record": task.to_record()}
    )
    for _ in range(3):
        try:
            files.publish_new(
                keys, files.write_temp(keys, key_data, fsync=fsync), key_name, fsync=fsync
            )
        except FileExistsError:
            prior = _replay(qd, key_name, task, fsync=fsync)
            if prior is not None:
                return prior
            continue  # the key was cleaned in between: take it
        return None
    raise StorageUnavailable("The idempotency key kept changing; try again.")


def replay_of(qd: QueueDirs, task: Task, *, fsync: files.Durable) -> Task | None:
    """The task a keyed post's Idempotency-Key already made, or None (a new key): looked up
    before a capped post counts its room, since a replay adds nothing to the queue.
    IdempotencyKeyReused if the key was used with another item."""
    assert task.idempotency_key is not None
    return _replay(qd, paths.key_file(task.posted_by, task.idempotency_key), task, fsync=fsync)


def check_keys(qd: QueueDirs, keyed: list[tuple[int, Task]]) -> None:
    """Refuse a batch (naming the entry) whose Idempotency-Key was already used with another
    item, before anything of the batch is written."""
    for index, task in keyed:
        assert task.idempotency_key is not None
        key = _key(qd, paths.key_file(task.posted_by, task.idempotency_key))
        if key is None:
            continue
        if key.get("item") != item_hash(task.item):
            raise IdempotencyKeyReused().at(index)


def settle_keys(
    qd: QueueDirs, keyed: list[tuple[int, Task]], *, fsync: files.Durable
) -> dict[str, Task]:
    """settle_key for each keyed task of a batch (with its index), sharing the flushes: every
    key file is written and fsynced (all at once), then published, then the keys directory is
    synced once, before any task is written. Returns the prior task of each replayed one, by
    the new task's id.

    A refusal met on the way (a key that another process used with another item since
    check_keys looked) takes back the keys this batch published, so nothing of it stays."""
    keys = qd.fd(paths.KEYS_DIR)
    priors: dict[str, Task] = {}
    published: list[str] = []
    syncs = files.DirSyncs(fsync=fsync)
    datas = [
        orjson.dumps({"id": task.id, "item": item_hash(task.item), "record": task.to_record()})
        for _, task in keyed
    ]
    temps = files.write_temps([(keys, data) for data in datas], fsync=fsync)
    settled = 0
    try:
        for (index, task), data, temp in zip(keyed, datas, temps, strict=True):
            assert task.idempotency_key is not None
            key_name = paths.key_file(task.posted_by, task.idempotency_key)
            for _ in range(3):
                try:
                    files.publish_new(keys, temp, key_name, fsync=False)  # the temp goes if not
                except FileExistsError:
                    try:
                        prior = _replay(qd, key_name, task, fsync=fsync)
                    except IdempotencyKeyReused as exc:
                        raise exc.at(index) from exc
                    if prior is None:  # the key was cleaned in between: take it
                        temp = files.write_temp(keys, data, fsync=fsync)
                        continue
                    priors[task.id] = prior
                else:
                    published.append(key_name)
                    syncs.owe(keys)
                break
            else:
                raise StorageUnavailable("The idempotency key kept changing; try again.")
            settled += 1
        syncs.flush()
    except BaseException:
        for temp in temps[settled + 1 :]:  # the temps not yet published
            files.discard(keys, temp)
        for key_name in published:  # no task of this batch was written: its keys go too
            files.discard(keys, key_name)
        raise
    return priors


def write_tasks(qd: QueueDirs, tasks: list[Task], *, fsync: files.Durable) -> None:
    """write_task for a batch: every file written and fsynced (files.write_temps: all at once),
    then each renamed into pending/, then one fsync of pending/ for them all (the
    acknowledgement comes after it)."""
    pending = qd.fd("pending")
    if spares.usable(fsync):  # unkeyed (core.admit_many): every name is a new task's
        writes = [
            (pending, paths.task_file(task.id), orjson.dumps(task.to_record()), False)
            for task in tasks
        ]
        spares.write_all(qd, writes, fsync=fsync)
        return
    syncs = files.DirSyncs(fsync=fsync)
    temps = files.write_temps(
        [(pending, orjson.dumps(task.to_record())) for task in tasks], fsync=fsync
    )
    for index, (task, temp) in enumerate(zip(tasks, temps, strict=True)):
        try:
            if task.idempotency_key is None:
                files.commit_temp(pending, temp, paths.task_file(task.id), fsync=False)
            else:
                # FileExistsError: a replaying poster completed it from the key first, the same
                with contextlib.suppress(FileExistsError):
                    files.publish_new(pending, temp, paths.task_file(task.id), fsync=False)
        except BaseException:
            for later in temps[index + 1 :]:
                files.discard(pending, later)
            raise
        syncs.owe(pending)
    syncs.flush()


def write_task(qd: QueueDirs, task: Task, *, fsync: files.Durable) -> None:
    """Write a new pending task durably (a keyed one after settle_key made the key its own)."""
    data = orjson.dumps(task.to_record())
    if task.idempotency_key is None:
        files.write_durable(qd.fd("pending"), paths.task_file(task.id), data, fsync=fsync)
    else:
        _write_once(qd, task.id, data, fsync=fsync)


def withdraw_task(qd: QueueDirs, task: Task, *, fsync: files.Durable) -> bool:
    """Take a task just written into pending/ back out (its post is answered 503): renamed to
    a temp name first, atomically, so that a claim either took it before (the rename finds
    nothing: False, the post happened and is acknowledged) or never will. Its key goes next;
    the temp is removed last (or by the sweep's temp pass). An items disk that refuses the
    rename too leaves the task in pending/ (True all the same: the 503 stands)."""
    pending = qd.fd("pending")
    aside = files.temp_name()
    try:
        files.rename_aside(pending, paths.task_file(task.id), pending, aside)
    except FileNotFoundError:
        return False
    except StorageUnavailable:
        return True
    with contextlib.suppress(OSError, StorageUnavailable):
        remove_key(qd, task, fsync=fsync)
    with contextlib.suppress(OSError, StorageUnavailable):
        files.unlink(pending, aside, fsync=fsync)
    return True


def _write_once(qd: QueueDirs, task_id: str, data: bytes, *, fsync: files.Durable) -> None:
    pending = qd.fd("pending")
    temp = files.write_temp(pending, data, fsync=fsync)
    # FileExistsError: a replaying poster completed it from the key first, with the same record
    with contextlib.suppress(FileExistsError):
        files.publish_new(pending, temp, paths.task_file(task_id), fsync=fsync)


def _replay(qd: QueueDirs, key_name: str, task: Task, *, fsync: files.Durable) -> Task | None:
    """The task of the key's first post, or None if the key is gone (its task was cleaned)."""
    key = _key(qd, key_name)
    if key is None:
        return None
    if key.get("item") != item_hash(task.item):
        raise IdempotencyKeyReused()
    try:
        return copies.winner(qd, key["id"]).task
    except NotFound:
        first = Task.from_record(key["record"])
        _write_once(qd, first.id, orjson.dumps(key["record"]), fsync=fsync)
        return copies.winner(qd, first.id).task


def _key(qd: QueueDirs, key_name: str) -> Any:
    """A key file's record, or None when there is none: a FIFO, a directory or a symlink
    planted under a key's name is moved aside (strays.py), and the name is free."""
    keys = qd.fd(paths.KEYS_DIR)
    for _ in range(2):
        try:
            return orjson.loads(files.read_at(keys, key_name))
        except FileNotFoundError:
            return None
        except OSError as exc:
            if not strays.is_stray(exc):
                raise
        if strays.move_aside(qd, keys, key_name, paths.KEYS_DIR):
            return None
    raise StorageUnavailable("The idempotency key kept changing; try again.")


def remove_key(qd: QueueDirs, task: Task, *, fsync: files.Durable) -> None:
    """Drop a cleaned task's key, if it is still this task's."""
    if task.idempotency_key is None:
        return
    keys = qd.fd(paths.KEYS_DIR)
    name = paths.key_file(task.posted_by, task.idempotency_key)
    key = _key(qd, name)
    if key is None or key.get("id") != task.id:
        return  # already gone, or another task's
    with contextlib.suppress(FileNotFoundError):
        files.unlink(keys, name, fsync=fsync)
