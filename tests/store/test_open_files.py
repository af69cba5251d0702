"""Open files stay bounded however many queues and days a process touches.

A web server lives for weeks: it used to keep a descriptor for every day-file it ever wrote (so a
day-file the sweep pruned kept its space until a restart) and five for every queue it ever
touched, plus an inotify watch per queue it claimed from. Counted here from /proc/self/fd and
the change log's own fdinfo, i.e. what the kernel holds for this process.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import threading
from collections import Counter
from pathlib import Path

import pytest

from queues.store import QueueSettings, QueueStore, StoreConfig
from queues.store.inotify import changes

from .conftest import HOST, T0

DAY = 86_400_000
SETTINGS = QueueSettings(queue_seconds=10 * 86400, retain_seconds=10 * 86400)


def open_files() -> list[str]:
    """What each of this process's descriptors points at."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
    return found


def watches() -> int:
    """The inotify watches the pending indexes' change log holds, as the kernel reports them."""
    log = changes()
    if not log.available:
        return 0
    with open(f"/proc/self/fdinfo/{log.fd}") as info:
        return sum(1 for line in info if line.startswith("inotify wd:"))


def _config(tmp_path: Path, **kw: object) -> StoreConfig:
    return StoreConfig(items_dir=tmp_path / "items", logs_dir=tmp_path / "logs", fsync=False, **kw)  # type: ignore[arg-type]


@pytest.mark.slow
def test_posting_to_5000_queues_over_three_days_keeps_open_files_bounded(tmp_path):
    store = QueueStore(_config(tmp_path))
    try:
        before, watched = len(open_files()), watches()
        queues = [f"q{n}" for n in range(5000)]
        posted = {}
        highest = 0
        for n, queue in enumerate(queues):
            now = T0 + n * (3 * DAY // len(queues))  # three UTC days go by
            posted[queue] = store.post(
                HOST, queue, {"n": n}, settings=SETTINGS, posted_by="a", now=now
            ).task.id
            if n % 7 == 0:  # some queues are read too: their pending index subscribes
                store.stats(HOST, queue, now=now)
            if n % 250 == 0:
                highest = max(highest, len(open_files()))
        days = sorted(p.name for p in (tmp_path / "logs" / "tasks").iterdir())
        assert len(days) >= 3
        # every queue still works, the evicted ones first of all
        later = T0 + 3 * DAY + 1000
        for queue in queues:
            [task] = store.claim(HOST, queue, settings=SETTINGS, worker="w", now=later)
            assert task.id == posted[queue]
        highest = max(highest, len(open_files()))
        # the default keeps 128 queues' seven directories (states, keys, quarantine,
        # dependents, spare) and one day-file, nothing per queue more
        assert highest - before < 128 * 7 + 16, highest - before
        assert watches() - watched <= 128
    finally:
        store.close()


def test_a_pruned_day_file_is_not_held_open_by_the_process_that_wrote_it(tmp_path):
    """The web server writes lines for three days; the sweep (another store, as another process
    would) prunes the oldest: no descriptor of the writer still points at a deleted file."""
    config = _config(tmp_path, log_retain_days=1)
    server = QueueStore(config)
    try:
        for day in range(3):
            server.post(HOST, "resize", {"d": day}, settings=SETTINGS, posted_by="a",
                        now=T0 + day * DAY)  # fmt: skip
        sweeper = QueueStore(config)
        try:
            assert sweeper.core.prune_logs(now=T0 + 2 * DAY) == 1
        finally:
            sweeper.close()
        logs = str(tmp_path / "logs")
        deleted = [p for p in open_files() if p.startswith(logs) and p.endswith("(deleted)")]
        assert deleted == []
        # and its own prune, after two more days
        server.post(HOST, "resize", {"d": 4}, settings=SETTINGS, posted_by="a", now=T0 + 4 * DAY)
        assert server.core.prune_logs(now=T0 + 4 * DAY) >= 1
        assert [p for p in open_files() if p.startswith(logs) and p.endswith("(deleted)")] == []
        assert sum(p.startswith(logs) for p in open_files()) <= 1  # today's day-file at most
    finally:
        server.close()


def test_a_line_for_an_earlier_day_after_the_rollover_goes_to_its_own_day(h):
    """A slow thread stamps a line just before midnight and writes it after another thread
    rolled the day over: it lands in the earlier day-file, which is not kept open for it."""
    task = h.post()
    midnight = int(dt.datetime(2026, 7, 27, tzinfo=dt.UTC).timestamp() * 1000)
    log = h.store.core.log
    log.append(task, "claimed", now=midnight + 5)
    log.append(task, "progress", now=midnight - 1)
    log.append(task, "result", now=midnight + 6)
    tasks = h.config.logs_dir / "tasks"
    assert (tasks / "2026-07-26.jsonl").read_bytes().count(b'"event":"progress"') == 1
    assert (tasks / "2026-07-27.jsonl").read_bytes().count(b"\n") == 2
    held = [p for p in open_files() if p.startswith(str(tasks))]
    assert held == [str(tasks / "2026-07-27.jsonl")]


def test_a_held_queue_is_never_closed_however_many_others_are_opened(tmp_path):
    store = QueueStore(_config(tmp_path, open_queues=2))
    try:
        store.create_queue(HOST, "held")
        with store.queue_dirs(HOST, "held") as qd:
            pending = os.fstat(qd.fd("pending"))
            for n in range(10):
                store.post(HOST, f"q{n}", {"n": n}, settings=SETTINGS, posted_by="a", now=T0)
            still = os.fstat(qd.fd("pending"))
            assert (still.st_ino, still.st_dev) == (pending.st_ino, pending.st_dev)
            assert sum(1 for _ in os.scandir(qd.fd("pending"))) == 0
        # released: it goes with the others, and comes back when used
        for n in range(10):
            store.post(HOST, f"q{n}", {"n": n}, settings=SETTINGS, posted_by="a", now=T0)
        assert store.post(HOST, "held", {}, settings=SETTINGS, posted_by="a", now=T0).task
    finally:
        store.close()


def test_directories_used_outside_their_hold_are_refused_not_reused(tmp_path):
    store = QueueStore(_config(tmp_path, open_queues=1))
    try:
        with store.queue_dirs(HOST, "a", create=True) as qd:
            pass
        store.create_queue(HOST, "b")  # evicts a: its descriptor numbers may now name b's
        with pytest.raises(RuntimeError, match="outside"):
            qd.fd("pending")
        with pytest.raises(RuntimeError, match="outside"), store.core.lock:
            store.core.index(qd)
    finally:
        store.close()


@pytest.mark.slow
def test_threads_over_more_queues_than_the_bound_lose_nothing(tmp_path):
    """Eight threads post and claim at random across 24 queues while at most 3 stay open: no
    descriptor is closed under a verb (EBADF, or worse a reused number naming another queue),
    and every task posted is claimed exactly once, from the queue it was posted to."""
    store = QueueStore(_config(tmp_path, open_queues=3))
    queues = [f"q{n}" for n in range(24)]
    posted: dict[str, str] = {}
    claimed: list[tuple[str, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for n in range(300):
                queue = rng.choice(queues)
                if rng.random() < 0.55:
                    item = {"seed": seed, "n": n}
                    task = store.post(HOST, queue, item, settings=SETTINGS, posted_by="a").task
                    with lock:
                        posted[task.id] = queue
                else:
                    for task in store.claim(HOST, queue, settings=SETTINGS, worker=f"w{seed}",
                                            max_tasks=2):  # fmt: skip
                        with lock:
                            claimed.append((task.id, task.queue))
                if n % 50 == 0:
                    store.stats(HOST, queue)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for queue in queues:  # drain what is left
            while tasks := store.claim(HOST, queue, settings=SETTINGS, worker="d", max_tasks=100):
                claimed += [(t.id, t.queue) for t in tasks]
        counts = Counter(task_id for task_id, _ in claimed)
        assert set(counts) == set(posted) and max(counts.values()) == 1
        assert all(posted[task_id] == queue for task_id, queue in claimed)
        for queue in queues:
            assert not list((tmp_path / "items" / HOST / queue / "pending").glob("*.json"))
        assert len(store.core.open_queues()) <= 3
    finally:
        store.close()


def test_a_closed_queue_takes_its_indexes_and_their_watches_with_it(tmp_path):
    """A queue listed and claimed from has a listing index (a watch on each state directory) and
    a pending index (sharing the kernel's watch on pending/); when it is closed both go, and
    both are rebuilt, right, when it is used again."""
    store = QueueStore(_config(tmp_path, open_queues=1))
    try:
        watched = watches()
        task = store.post(HOST, "a", {"n": 1}, settings=SETTINGS, posted_by="a", now=T0).task
        assert store.list_tasks(HOST, "a").count == 1
        store.stats(HOST, "a", now=T0)
        assert watches() - watched == 3
        store.create_queue(HOST, "b")  # a is closed
        assert store.core.open_queues() == [(HOST, "b")]
        assert watches() == watched
        assert [t.id for t in store.list_tasks(HOST, "a").tasks] == [task.id]
        [claimed] = store.claim(HOST, "a", settings=SETTINGS, worker="w", now=T0 + 1)
        assert claimed.id == task.id
    finally:
        store.close()
