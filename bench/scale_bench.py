"""Scale benchmark (file store): what a long-lived process pays, per look, at 20,000, 200,000 and
1,000,000 tasks on one queue (half pending, half done, nothing due): a sweep pass that changes
nothing, the queue's stats, and (unless --store-only) the dashboard and /metrics through
Django's test client. Its cost should follow what is due or changed, not what is stored.

The tasks are written straight into the directories in the store's record format (as a restore
would; posting a million through the verbs would take most of an hour). Each size gets a fresh
process (spawned): its first look pays for learning the queue once (shown, not judged), then each
look is timed `--repeats` times and the median kept. Between looks, 10 tasks are posted and 10
finished by another process's worth of changes (a second store in the same process: its changes
reach the long-lived one only through the file system and inotify), so that a look has some
changes to follow, as it would in service.

Page cache warm, no flushes. Timed figures: the machine may be shared; rerun and compare.

Run: .venv/bin/python bench/scale_bench.py [--sizes 20000,200000,1000000] [--repeats R]
                                           [--store-only] [--profile "sweep pass"|stats]
"""

from __future__ import annotations

import argparse
import cProfile
import multiprocessing as mp
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from queues.store import QueueSettings, QueueStore, State, StoreConfig, Task, paths  # noqa: E402

HOST, QUEUE = "bench.example.com", "q"
# nothing falls due while the bench runs: a day's window and lease, a week's retention
S = QueueSettings(queue_seconds=86400, lease_seconds=3600, retain_seconds=7 * 86400,
                  max_pending=0)  # fmt: skip
TOKEN = "bench-scale-metrics-token"


def fill(items: Path, logs: Path, n: int) -> None:
    """n tasks, half pending and half finished, posted in the last hour."""
    store = QueueStore(StoreConfig(items_dir=items, logs_dir=logs, fsync=False))
    now = int(time.time() * 1000)
    with store.queue_dirs(HOST, QUEUE, create=True) as qd:
        for i in range(n):
            done = i % 2 == 1
            posted_at = now - 3_600_000 + i * 3_000_000 // n
            task = Task(
                id=f"{(i * 2654435761 + 12345) % (1 << 64):016x}",
                host=HOST,
                queue=QUEUE,
                status=State.FINISHED if done else State.PENDING,
                item={"n": i, "pad": "x" * 100},
                posted_by="bench",
                posted_at=posted_at,
                updated_at=posted_at + 1000 if done else posted_at,
                attempts=1 if done else 0,
                result={"ok": True} if done else None,
                finished_at=posted_at + 1000 if done else None,
                rev=3 if done else 1,
                seq=i,
            )
            fd = os.open(paths.task_file(task.id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644,
                         dir_fd=qd.fd("done" if done else "pending"))  # fmt: skip
            os.write(fd, orjson.dumps(task.to_record()))
            os.close(fd)
    store.close()


def churn(other: QueueStore, round_: int) -> None:
    """Another writer's changes between two looks: 10 posted, 10 claimed and finished."""
    from queues.store.batch import PostEntry

    other.post_many(HOST, QUEUE, [PostEntry(item={"round": round_, "i": i}) for i in range(10)],
                    settings=S, posted_by="bench")  # fmt: skip
    for task in other.claim(HOST, QUEUE, settings=S, worker="w", max_tasks=10):
        other.finish(HOST, QUEUE, task.id, settings=S, worker="w", attempt=task.attempts,
                     result={"ok": True})  # fmt: skip


def timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def looks(store: QueueStore, site: bool) -> dict[str, Any]:
    """The looks to time, by name: each a callable taking nothing."""

    def sweep() -> None:
        report = store.sweep_queue(HOST, QUEUE, settings=S)
        assert report.cleaned == report.timeout == report.requeue == 0, report
        assert not report.errors, report.errors

    found: dict[str, Any] = {
        "sweep pass": sweep,
        "stats": lambda: store.stats(HOST, QUEUE),
    }
    if site:
        from django.test import Client

        client = Client()
        client.force_login(_staff())
        found["dashboard"] = lambda: _ok(client.get("/"))
        found["/metrics"] = lambda: _ok(
            client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        )
    return found


def _ok(response: Any) -> None:
    assert response.status_code == 200, response.status_code


def _staff() -> Any:
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(
        username="bench", defaults={"is_staff": True, "is_superuser": True}
    )
    return user


def _site(folder: Path) -> QueueStore:
    """The Django site over the filled store, and the store its views use."""
    from django_site import set_up_site

    set_up_site(folder, env={"TASKHOSTER_METRICS_TOKEN": TOKEN})
    from queues.models import Host, Queue

    host = Host.objects.create(name=HOST)
    Queue.objects.create(host=host, name=QUEUE, queue_seconds=S.queue_seconds,
                         lease_seconds=S.lease_seconds, retain_seconds=S.retain_seconds,
                         max_pending=0)  # fmt: skip
    from queues import stores

    return stores.router().files


def measure(n: int, repeats: int, site: bool, profile: str, out: Any) -> None:
    """In a fresh process: fill, then time each look; results go to `out`."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        folder = Path(tmp)
        fill(folder / "items", folder / "logs", n)
        time.sleep(0.2)  # the last records past the age a stamp trusts (stamps.RACY_NS)
        if site:
            store = _site(folder)
        else:
            store = QueueStore(StoreConfig(items_dir=folder / "items", logs_dir=folder / "logs",
                                           fsync=False))  # fmt: skip
        other = QueueStore(store.config)
        named = looks(store, site)
        first = {name: timed(call) for name, call in named.items()}
        if profile:
            churn(other, -1)
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(repeats):
                named[profile]()
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        times: dict[str, list[float]] = {name: [] for name in named}
        for r in range(repeats):
            churn(other, r)
            time.sleep(0.12)  # the churn's records old enough to be trusted by their stamps
            for name, call in named.items():
                times[name].append(timed(call))
        other.close()
        steady = {name: statistics.median(t) for name, t in times.items()}
        out.put((n, first, steady, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,200000,1000000", help="tasks on the queue")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--store-only", action="store_true",
                        help="not the dashboard and /metrics (no Django site)")  # fmt: skip
    parser.add_argument("--profile", default="", help="print a cProfile of one look's repeats")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    context = mp.get_context("spawn")
    results = []
    for n in sizes:
        out = context.Queue()
        site = not args.store_only
        child = context.Process(target=measure, args=(n, args.repeats, site, args.profile, out))
        child.start()
        results.append(out.get())
        child.join()
    print("$ " + " ".join([".venv/bin/python", *sys.argv]))
    print(f"page cache warm, no flushes; load average {os.getloadavg()[0]:.1f} (a shared machine)")
    base = results[0][2]
    for n, first, steady, rss in results:
        print(f"{n:>9,} tasks  the process's peak resident memory {rss:,.0f} MB")
        for name, ms in steady.items():
            print(f"{n:>9,} tasks  {name:<10}  {ms:8.1f} ms  ({ms / base[name]:.1f}x the "
                  f"{results[0][0]:,}'s; first look {first[name]:,.0f} ms)")  # fmt: skip


if __name__ == "__main__":
    main()
