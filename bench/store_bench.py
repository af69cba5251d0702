"""Store benchmark: lifecycles per second against the raw cost of the same system calls, claim
cost by queue depth, index memory, and a sweep over 100,000 tasks.

Run: .venv/bin/python bench/store_bench.py [--quick]
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.store import QueueSettings, QueueStore, StoreConfig, sweep_queue

HOST, QUEUE, IDLE = "bench.example.com", "q", "idle"
S = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600)


def make_store(root: Path, fsync: bool, flush: str = "fsync") -> QueueStore:
    config = StoreConfig(items_dir=root / "items", logs_dir=root / "logs", fsync=fsync, flush=flush)
    return QueueStore(config)


def lifecycles(root: str, fsync: bool, n: int, worker: str = "w") -> float:
    store = make_store(Path(root), fsync)
    start = time.perf_counter()
    finished = 0
    while finished < n:  # with two processes, either may claim the other's task
        store.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="b")
        for task in store.claim(HOST, QUEUE, settings=S, worker=worker):
            store.finish(
                HOST,
                QUEUE,
                task.id,
                settings=S,
                worker=worker,
                attempt=task.attempts,
                result={"ok": 1},
            )
            finished += 1
    elapsed = time.perf_counter() - start
    store.close()
    return n / elapsed


def beside_a_waiting_claim(root: Path, n: int) -> tuple[float, float]:
    """Lifecycles (fsync off) in a process where another thread's claim waits on another queue,
    as in a server process: µs of CPU and context switches per lifecycle. The switches are the
    robust figure on a noisy machine: each is a wake of a thread that had nothing to do."""
    store = make_store(root, False)
    waiting = threading.Thread(
        target=store.wait_claim,
        args=(HOST, IDLE),
        kwargs={"settings": S, "worker": "idle", "wait_seconds": 600},
    )
    waiting.start()
    time.sleep(0.2)  # the claim looked, found nothing, and now waits on the idle queue
    lifecycles(str(root), False, 100)  # warm up
    before = resource.getrusage(resource.RUSAGE_SELF)
    lifecycles(str(root), False, n)
    after = resource.getrusage(resource.RUSAGE_SELF)
    store.post(HOST, IDLE, {"wake": True}, settings=S, posted_by="b")  # ends the wait
    waiting.join(10)
    store.close()
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    switches = (after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw)
    return cpu * 1e6 / n, switches / n


def _child(root: str, fsync: bool, n: int, worker: str, out: mp.Queue) -> None:  # type: ignore[type-arg]
    out.put(lifecycles(root, fsync, n, worker))


def two_processes(root: Path, fsync: bool, n: int) -> float:
    make_store(root, fsync).create_queue(HOST, QUEUE)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(str(root), fsync, n, f"w{i}", out)) for i in range(2)]
    for p in procs:
        p.start()
    rates = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(rates)  # each process's own rate, measured over its own loop (no spawn cost)


def raw_ceiling(root: Path, fsync: bool, n: int) -> float:
    """The same disk calls as one lifecycle, in a plain loop: the ceiling for the store."""
    dirs = {d: root / "raw" / d for d in ("pending", "processing", "done")}
    for d in dirs.values():
        d.mkdir(parents=True)
    dfd = {d: os.open(p, os.O_RDONLY | os.O_DIRECTORY) for d, p in dirs.items()}
    log = os.open(root / "raw" / "log.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    record, line = b'{"x":' + b"1" * 300 + b"}", b"l" * 250 + b"\n"

    def write(d: str, name: str) -> None:
        fd = os.open(".tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd[d])
        os.write(fd, record)
        if fsync:
            os.fsync(fd)
        os.close(fd)
        os.rename(".tmp", name, src_dir_fd=dfd[d], dst_dir_fd=dfd[d])
        if fsync:
            os.fsync(dfd[d])

    def append() -> None:
        os.write(log, line)
        if fsync:
            os.fdatasync(log)

    start = time.perf_counter()
    for i in range(n):
        name = f"{i:016x}.json"
        write("pending", name)
        append()
        os.rename(name, name, src_dir_fd=dfd["pending"], dst_dir_fd=dfd["processing"])
        write("processing", name)
        append()
        write("done", name)
        os.unlink(name, dir_fd=dfd["processing"])
        if fsync:
            os.fsync(dfd["processing"])
        append()
    return n / (time.perf_counter() - start)


def index_memory(root: Path) -> float:
    """MB the loaded index holds, in its own fresh store: tracemalloc slows every allocation
    several times over, so it must never run while the load is timed."""
    store = make_store(root, False)
    tracemalloc.start()
    with store.queue_dirs(HOST, QUEUE) as qd, store.core.lock:
        store.core.index(qd)
    memory = tracemalloc.get_traced_memory()[0] / 1e6
    tracemalloc.stop()
    store.close()
    return memory


def claim_cost(root: Path, depth: int, claims: int = 300) -> tuple[float, float, float]:
    """(µs per claim at this depth, seconds to load the index once, index MB)."""
    store = make_store(root, False)
    store.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="b")
    pending = root / "items" / HOST / QUEUE / "pending"
    template = next(pending.glob("*.json")).read_text()
    for i in range(depth - 1):  # filled directly, as a restore would: the store's exact format
        task_id = f"{i:016x}"
        (pending / f"{task_id}.json").write_text(template.replace(template[7:23], task_id))
    store.close()
    memory = index_memory(root)
    store = make_store(root, False)  # a fresh process view: the index loads from the listing
    start = time.perf_counter()
    with store.queue_dirs(HOST, QUEUE) as qd, store.core.lock:
        store.core.index(qd)
    load = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(claims):
        assert store.claim(HOST, QUEUE, settings=S, worker="w")
    per_claim = (time.perf_counter() - start) / claims * 1e6
    store.close()
    return per_claim, load, memory


def main() -> None:
    quick = "--quick" in sys.argv
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        base = Path(tmp)
        for fsync, n in ((True, 100 if quick else 300), (False, 1000 if quick else 3000)):
            tag = "fsync on" if fsync else "fsync off"
            raw = raw_ceiling(base / f"raw-{tag}", fsync, n)
            one = lifecycles(str(base / f"one-{tag}"), fsync, n)
            two = two_processes(base / f"two-{tag}", fsync, n // 2)
            rows += [
                (f"lifecycles/s, 1 process, {tag}", f"{one:,.0f}"),
                (f"lifecycles/s, 2 processes, {tag}", f"{two:,.0f}"),
                (f"raw syscalls ceiling/s, {tag}", f"{raw:,.0f}"),
                (f"ratio 1 process / raw, {tag}", f"{one / raw:.0%}"),
            ]
        cpu_us, switches = beside_a_waiting_claim(base / "beside", 1000 if quick else 3000)
        rows.append(
            (
                "lifecycle beside a waiting claim, fsync off",
                f"{cpu_us:,.0f} µs CPU, {switches:.1f} context switches each",
            )
        )
        depths = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
        base_cost = None
        for depth in depths:
            cost, load, memory = claim_cost(base / f"depth-{depth}", depth)
            base_cost = base_cost or cost
            rows += [
                (
                    f"claim at depth {depth:,} (fsync off)",
                    f"{cost:,.0f} µs, {cost / base_cost:.2f}x of 1k",
                ),
                (f"index load / memory at {depth:,}", f"{load:.2f} s / {memory:.1f} MB"),
            ]
        store = make_store(base / f"depth-{depths[-1]}", False)
        start = time.perf_counter()
        report = sweep_queue(store, HOST, QUEUE, S, now=int(time.time() * 1000))
        rows.append(
            (
                f"sweep over {depths[-1]:,} tasks (fresh process)",
                f"{time.perf_counter() - start:.2f} s ({report.requeue} requeued)",
            )
        )
        start = time.perf_counter()
        sweep_queue(store, HOST, QUEUE, S, now=int(time.time() * 1000))
        rows.append(
            (f"sweep over {depths[-1]:,} tasks (again)", f"{time.perf_counter() - start:.2f} s")
        )
    width = max(len(k) for k, _ in rows)
    print("$ " + " ".join([".venv/bin/python", *sys.argv]))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
