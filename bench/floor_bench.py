"""The store's durable batched lifecycle beside the floor of its file protocol (issue 34).

    .venv/bin/python bench/floor_bench.py [--quick] [--tasks 2000] [--runs 3] [--batch 100]

Three systems take turns, run after run, each doing N task lifecycles (post, claim, finish) in
one process, in batches of --batch, durable by syncfs:
- `floor fresh` and `floor recycle`: ../shared/bench/lifecycle_floor.c (compiled here with the
  system's cc at the start of the run), the store's system calls and nothing else, with a new
  inode for every write (one flush a phase) or reusing spare inodes (two flushes a phase);
- `store`: QueueStore.post_many, claim(max_tasks), finish_many (spare inodes where the queue
  has them: store.md, fourth version).
Each "vs" is the median of the run-by-run ratios to the floor's `recycle` mode. The runs write
on the disk of --dir (default var/, not a tmpfs), and no run's files are removed before the
last run (freed inodes are discarded in the background and would slow the next run).

Then the lifecycle check: --check tasks (3,000 by default) through the same durable batched
lifecycle, every record read back whole, a sweep past retention, and the file system's used
inodes compared with where they started (they must come back within spares.POOL_BOUND).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import orjson  # noqa: E402
from store_bench import HOST, QUEUE, S, make_store  # noqa: E402

from queues.store import PostEntry, Report, spares, sweep_queue  # noqa: E402

FLOOR_SOURCE = ROOT.parent / "shared" / "bench" / "lifecycle_floor.c"
SYSTEMS = ("floor fresh", "floor recycle", "store")


def compile_floor(out: Path) -> Path | None:
    """The floor program built from the shared source, or None where it or a compiler lacks."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not FLOOR_SOURCE.exists() or cc is None:
        return None
    binary = out / "lifecycle_floor"
    subprocess.run([cc, "-O2", "-o", str(binary), str(FLOOR_SOURCE)], check=True)
    return binary


def floor_run(binary: Path, mode: str, n: int, batch: int, root: Path) -> float:
    done = subprocess.run([str(binary), mode, str(n), str(root), "syncfs", str(batch)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return float(done.stdout.split()[-2])  # "... N lifecycles/s"


def store_lifecycles(n: int, batch: int, root: Path, *, settings=S) -> float:  # type: ignore[no-untyped-def]
    """n lifecycles in batches, one process, syncfs: lifecycles per second."""
    store = make_store(root, True, "syncfs")
    store.create_queue(HOST, QUEUE)
    started = time.perf_counter()
    for first in range(0, n, batch):
        entries = [PostEntry(item={"n": i}) for i in range(first, min(first + batch, n))]
        store.post_many(HOST, QUEUE, entries, settings=settings, posted_by="bench")
        tasks = store.claim(HOST, QUEUE, settings=settings, worker="w", max_tasks=batch)
        reports = [Report(task_id=t.id, attempt=t.attempts, outcome="result", result={"ok": 1})
                   for t in tasks]  # fmt: skip
        store.finish_many(HOST, QUEUE, reports, settings=settings, worker="w")
    took = time.perf_counter() - started
    store.close()
    return n / took


def used_inodes(path: Path) -> int:
    found = os.statvfs(path)
    return found.f_files - found.f_ffree


def lifecycle_check(n: int, batch: int, root: Path) -> None:
    """n durable lifecycles, every record read back whole, retention, inodes counted."""
    root.mkdir(parents=True)
    keep = replace(S, retain_seconds=60)
    before = used_inodes(root)
    rate = store_lifecycles(n, batch, root, settings=keep)
    done_dir = root / "items" / HOST / QUEUE / "done"
    whole = 0
    for path in done_dir.glob("*.json"):
        record = orjson.loads(path.read_bytes())
        whole += record["id"] == path.stem and record["status"] == "finished"
    peak = used_inodes(root)
    store = make_store(root, True, "syncfs")
    report = sweep_queue(store, HOST, QUEUE, keep, now=int(time.time() * 1000) + 3_600_000)
    store.close()
    queue_files = sum(len(files) for _, _, files in os.walk(root / "items" / HOST / QUEUE))
    after = used_inodes(root)
    print(f"\nlifecycle check: {n:,} durable lifecycles at {rate:,.0f}/s; {whole:,} of {n:,} "
          f"records read back whole and finished")  # fmt: skip
    print(f"after retention ({report.cleaned:,} cleaned): the queue holds {queue_files:,} files "
          f"(spares.POOL_BOUND {spares.POOL_BOUND:,}); used inodes on the file system: "
          f"{before:,} before, {peak:,} at the peak, {after:,} after ({after - before:+,}; "
          f"other programs on the same file system move this figure)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 tasks, 1 run, check 500")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--check", type=int, default=None, help="lifecycle check's tasks")
    parser.add_argument("--dir", type=Path, default=ROOT / "var", help="where runs write")
    args = parser.parse_args()
    n = args.tasks or (500 if args.quick else 2_000)
    runs = args.runs or (1 if args.quick else 3)
    check = args.check or (500 if args.quick else 3_000)
    print("$ " + " ".join([".venv/bin/python", "bench/floor_bench.py", *sys.argv[1:]]), flush=True)
    args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="floor-bench-", dir=args.dir) as tmp:
        binary = compile_floor(Path(tmp))
        systems = SYSTEMS if binary is not None else ("store",)
        if binary is None:
            print(f"(no floor: {FLOOR_SOURCE} or a C compiler is missing)")
        rates: dict[str, list[float]] = {s: [] for s in systems}
        for run in range(runs):  # the systems take turns, run after run
            for system in systems:
                root = Path(tmp) / f"{system.replace(' ', '-')}-{run}"
                if system == "store":
                    rate = store_lifecycles(n, args.batch, root)
                else:
                    assert binary is not None
                    rate = floor_run(binary, system.split()[1], n, args.batch, root)
                rates[system].append(rate)
                print(f"run {run + 1}: {system}: {rate:,.0f} lifecycles/s", flush=True)
        print(f"\n{n:,} lifecycles in batches of {args.batch}, syncfs, one process, {runs} "
              f"run(s) each, alternating (a shared machine: timed figures move)")  # fmt: skip
        print(f"{'system':<16}{'median/s':>10}{'min':>9}{'max':>9}{'vs recycle':>12}")
        for system in systems:
            got = rates[system]
            versus = ""
            if "floor recycle" in rates:
                ratios = [a / b for a, b in zip(got, rates["floor recycle"], strict=True)]
                versus = f"{statistics.median(ratios):.2f}x"
            print(f"{system:<16}{statistics.median(got):>10,.0f}{min(got):>9,.0f}"
                  f"{max(got):>9,.0f}{versus:>12}")  # fmt: skip
        lifecycle_check(check, args.batch, Path(tmp) / "check")


if __name__ == "__main__":
    main()
