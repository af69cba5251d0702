"""Listing benchmark: a page of 50 from a queue of 100,000 tasks, first and deep pages, with and
without a status filter and for one producer, beside the full scan it replaces (every record of
the three state directories read, as list_tasks did) and one listdir of those directories.

Each figure is measured in a fresh spawned process: the first listing there learns every record
once (the cold figure); later pages read only their own records (warm, median of the repeats).

Run: .venv/bin/python bench/listing_bench.py [--quick] [--tasks N] [--repeats R]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.store import (
    ANY,
    QueueSettings,
    QueueStore,
    State,
    StoreConfig,
    Task,
    TaskPage,
    copies,
    paths,
)
from queues.store.errors import CorruptRecord
from queues.store.paths import QueueDirs
from queues.store.results import _Any

HOST, QUEUE = "bench.example.com", "q"
S = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600)
T0 = 1_751_500_000_000
LIMIT = 50
# every 10 tasks: 2 pending (1 delayed), 1 processing, 5 finished, 1 failed, 1 cancelled
STATUSES = [State.PENDING] * 2 + [State.PROCESSING] + [State.FINISHED] * 5
STATUSES += [State.FAILED, State.CANCELLED]
POSTERS = ["alice"] * 5 + ["bob"] * 3 + [None] * 2  # alice 50%, bob 30%, public 20%


def make_store(root: Path) -> QueueStore:
    return QueueStore(StoreConfig(items_dir=root / "items", logs_dir=root / "logs", fsync=False))


def held(store: QueueStore, *, create: bool = False) -> QueueDirs:
    """The queue's directories, held until this bench process ends."""
    return _HOLDS.enter_context(store.queue_dirs(HOST, QUEUE, create=create))


_HOLDS = contextlib.ExitStack()


def fill(root: Path, n: int) -> None:
    """n tasks written straight into the directories in the store's own record format (as a
    restore would), a task left in two directories by an interrupted move, and a corrupt file."""
    store = make_store(root)
    qd = held(store, create=True)
    for i in range(n):
        status = STATUSES[i % 10]
        posted_at = T0 + (i - i % 7) * 40  # runs of equal postedAt: the id breaks the tie
        task = Task(
            id=f"{i * 2654435761 % (1 << 64):016x}",
            host=HOST,
            queue=QUEUE,
            status=status,
            item={"image": f"s3://bucket/{i}.png", "sizes": [64, 256, 1024]},
            posted_by=POSTERS[(i // 10 + i) % 10],
            posted_at=posted_at,
            updated_at=posted_at + 1000,
            attempts=0 if status is State.PENDING else 1,
            result={"ok": True} if status is State.FINISHED else None,
            finished_at=posted_at + 2000 if status.terminal else None,
            rev=1 if status is State.PENDING else 3,
            available_at=posted_at + 3_600_000 if i % 20 == 1 else 0,
        )
        _write(qd.fd(status.directory), task)
        if i % 25_000 == 3:  # an interrupted finish: the processing copy it left behind
            _write(qd.fd("processing"), dataclasses.replace(task, status=State.PROCESSING, rev=2))
    with open(
        os.open("0123456789abcdef.json", os.O_WRONLY | os.O_CREAT, dir_fd=qd.fd("done")), "wb"
    ) as corrupt:
        corrupt.write(b'{"id": "0123456789abcdef", "stat')
    store.close()


def _write(dir_fd: int, task: Task) -> None:
    fd = os.open(
        paths.task_file(task.id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dir_fd
    )
    os.write(fd, orjson.dumps(task.to_record()))
    os.close(fd)


def full_scan(
    store: QueueStore, status: State | None, posted_by: str | _Any | None, offset: int
) -> TaskPage:
    """The listing this replaces: every record read, the winning copies filtered and sorted."""
    qd = held(store)
    best: dict[str, Task] = {}
    for directory in paths.STATE_DIRS:
        for entry in os.scandir(qd.fd(directory)):
            task_id = paths.task_id_of(entry.name)
            if task_id is None:
                continue
            try:
                task = copies.read_copy(qd, directory, task_id)
            except CorruptRecord:
                continue
            if task is not None and (task_id not in best or task.rev > best[task_id].rev):
                best[task_id] = task
    found = [
        t
        for t in best.values()
        if (status is None or t.status is status)
        and (isinstance(posted_by, _Any) or t.posted_by == posted_by)
    ]
    found.sort(key=lambda t: (t.posted_at, t.id), reverse=True)
    return TaskPage(count=len(found), tasks=found[offset : offset + LIMIT])


def listdir_cost(store: QueueStore) -> float:
    qd = held(store)
    start = time.perf_counter()
    for directory in paths.STATE_DIRS:
        os.listdir(qd.fd(directory))
    return time.perf_counter() - start


CASES: list[tuple[str, State | None, str | _Any | None]] = [
    ("all tasks (operator)", None, ANY),
    ("status=finished", State.FINISHED, ANY),
    ("status=pending", State.PENDING, ANY),
    ("postedBy=bob (producer)", None, "bob"),
    ("postedBy=bob, status=finished", State.FINISHED, "bob"),
    ("public posts only", None, None),
]


def measure(root: str, repeats: int, out: Any) -> None:
    """In a fresh process: the cold first listing, then each case's first, middle and deep
    pages, a page after another store's changes, and the baselines."""
    rows: list[tuple[str, ...]] = []
    worst = 0.0  # the slowest page's median
    store = make_store(Path(root))
    start = time.perf_counter()
    first = store.list_tasks(HOST, QUEUE, limit=LIMIT)
    cold = time.perf_counter() - start
    index = store.core.listings.of(held(store))
    out.put(("cold", cold, first.count, index.records_learned))
    for label, status, posted_by in CASES:
        count = store.list_tasks(HOST, QUEUE, status=status, posted_by=posted_by, limit=1).count
        deep = max(count - 1000, 0) if count < 100_000 else 99_000
        for where, offset in (("first", 0), ("middle", count // 2), ("deep", deep)):
            times, reads = [], 0
            for _ in range(repeats):
                before = index.records_paged + index.records_learned
                start = time.perf_counter()
                page = store.list_tasks(
                    HOST, QUEUE, status=status, posted_by=posted_by, limit=LIMIT, offset=offset
                )
                times.append(time.perf_counter() - start)
                reads = index.records_paged + index.records_learned - before
            assert len(page.tasks) == min(LIMIT, max(count - offset, 0)), (label, where)
            rows.append(_row(f"{label}, {where}", offset, count, times, reads))
            worst = max(worst, statistics.median(times))
    # another store posts, claims and finishes 334 tasks (1,002 changes), then a page is asked
    writer = make_store(Path(root))
    for _ in range(334):
        writer.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="carol")
        [task] = writer.claim(HOST, QUEUE, settings=S, worker="w")
        writer.finish(
            HOST, QUEUE, task.id, settings=S, worker="w", attempt=task.attempts, result={"ok": 1}
        )
    writer.close()
    before = index.records_paged + index.records_learned
    start = time.perf_counter()
    page = store.list_tasks(HOST, QUEUE, limit=LIMIT)
    churn = time.perf_counter() - start
    reads = index.records_paged + index.records_learned - before
    rows.append(
        _row("all tasks, first, after 1,002 changes elsewhere", 0, page.count, [churn], reads)
    )
    # the baselines, in this same process
    times = [listdir_cost(store) for _ in range(repeats)]
    rows.append(_row("baseline: one listdir of the 3 directories", 0, 0, times, 0))
    for label, status, posted_by in (CASES[0], CASES[3]):
        start = time.perf_counter()
        old = full_scan(store, status, posted_by, 0)
        scan = time.perf_counter() - start
        rows.append(_row(f"baseline: full scan, {label}", 0, old.count, [scan], old.count))
        new = store.list_tasks(HOST, QUEUE, status=status, posted_by=posted_by, limit=LIMIT)
        assert [t.id for t in new.tasks] == [t.id for t in old.tasks], label
    out.put(("rows", rows, worst))
    store.close()


def _row(label: str, offset: int, count: int, times: list[float], reads: int) -> tuple[str, ...]:
    return (
        label,
        f"{offset:,}",
        f"{count:,}",
        f"{statistics.median(times) * 1e3:,.1f}",
        f"{max(times) * 1e3:,.1f}",
        f"{reads:,}",
    )


def memory(root: str, out: Any) -> None:
    """MB the index of the queue holds, in its own fresh process (tracemalloc slows every
    allocation several times over, so it never runs while anything is timed)."""
    store = make_store(Path(root))
    tracemalloc.start()
    store.list_tasks(HOST, QUEUE, limit=LIMIT)
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    out.put((traced, len(store.core.listings.of(held(store)).tasks)))
    store.close()


def in_child(target: Any, *args: Any) -> list[Any]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, out))
    proc.start()
    got = []
    while proc.is_alive() or not out.empty():
        try:
            got.append(out.get(timeout=0.5))
        except Exception:  # queue.Empty: the child is still working
            continue
    proc.join()
    if proc.exitcode:
        raise SystemExit(f"{target.__name__} failed with exit code {proc.exitcode}")
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 tasks, 3 repeats")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    n = args.tasks or (20_000 if args.quick else 100_000)
    repeats = args.repeats or (3 if args.quick else 7)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        start = time.perf_counter()
        fill(Path(tmp), n)
        filled = time.perf_counter() - start
        results = in_child(measure, tmp, repeats)
        (held, entries), *_ = in_child(memory, tmp)
    cold = next(r for r in results if r[0] == "cold")
    _, rows, worst = next(r for r in results if r[0] == "rows")
    print(
        f"listing bench: {n:,} tasks (filled in {filled:.1f} s), pages of {LIMIT}, "
        f"median of {repeats}"
    )
    print(f"command: {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print()
    header = ("page", "offset", "count", "median ms", "max ms", "records read")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    print()
    verdict = "met" if worst < 0.1 else "MISSED"
    print(f"target, every page under 100 ms: {verdict} (slowest median {worst * 1e3:.1f} ms)")
    print(
        f"first listing in a fresh process: {cold[1] * 1e3:,.0f} ms "
        f"({cold[3]:,} records learned, {cold[1] / max(cold[3], 1) * 1e6:.1f} µs each)"
    )
    print(
        f"index memory: {held / 1e6:.1f} MB for {entries:,} tasks "
        f"({held / max(entries, 1):.0f} bytes each)"
    )


if __name__ == "__main__":
    main()
