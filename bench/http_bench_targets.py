"""Issue 11's two HTTP targets, each measured beside the same work done in-process.

- one at a time: C clients each looping post, claim, result, read (its own task, so the read
  stamps fetchedAt as a producer's first read does), against C threads of one process doing
  the same four store calls on one QueueStore (what one server process's threads share);
- batches: P producers posting batches of 100 while W workers claim `max` 100 and report
  each claim's tasks in one batch finish, against P + W processes doing the same store calls.

The in-process side runs on the same file system as the server, in forked children, between
the HTTP runs (interleaved), so the machine's noise falls on both.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from http_bench_server import HOST, QUEUE, Server, configured_threads

from queues.store import PostEntry, QueueSettings, QueueStore, Report, Reported, StoreConfig
from taskhoster.client import Client

CTX = mp.get_context("fork")
BATCH = 100
# As the bench server's queue (createqueue --lease-seconds 60, the model's default window).
SETTINGS = QueueSettings(lease_seconds=60)


# -- one at a time: post, claim, result, read ----------------------------------------------


def _http_each(url: str, tokens: dict[str, str], name: str, count: int, out: Any) -> None:
    producer = Client(url, tokens["producer"], timeout=30)
    worker = Client(url, tokens["worker"], timeout=30)
    requests = 0
    for n in range(count):
        producer.post(HOST, QUEUE, {"n": n})
        task = None
        while not isinstance(task, dict):  # another client may take the task this one posted
            task = worker.claim(HOST, QUEUE, name, wait=1)
            requests += 1
        worker.result(HOST, QUEUE, task["id"], name, task["attempts"], {"ok": True})
        producer.get(HOST, QUEUE, task["id"])
        requests += 3
    out.put(requests)


def http_each(url: str, tokens: dict[str, str], clients: int, count: int) -> dict[str, float]:
    """Lifecycles/s of `clients` processes each running `count` lifecycles over HTTP."""
    out = CTX.Queue()
    procs = [CTX.Process(target=_http_each, args=(url, tokens, f"c{i}", count, out))
             for i in range(clients)]  # fmt: skip
    started = time.monotonic()
    for p in procs:
        p.start()
    requests = sum(out.get(timeout=600) for _ in procs)
    elapsed = time.monotonic() - started
    for p in procs:
        p.join()
    done = clients * count
    return {"rate": done / elapsed, "units": done, "requests": requests / done}


def _store_each(store: QueueStore, name: str, count: int) -> None:
    for n in range(count):
        store.post(HOST, QUEUE, {"n": n}, settings=SETTINGS, posted_by="producer")
        tasks: list[Any] = []
        while not tasks:
            tasks = store.claim(HOST, QUEUE, settings=SETTINGS, worker=name)
        task = tasks[0]
        store.finish(HOST, QUEUE, task.id, settings=SETTINGS, worker=name,
                     attempt=task.attempts, result={"ok": True})  # fmt: skip
        # The API's first read by the producer: read, then stamp fetchedAt (queues.api.actions)
        read = store.read(HOST, QUEUE, task.id)
        if read.status.terminal and read.fetched_at is None:
            store.fetch(HOST, QUEUE, task.id, current=read)


def _inprocess_each(root: str, fsync: bool, threads: int, count: int, out: Any) -> None:
    store = QueueStore(StoreConfig(items_dir=Path(root) / "items",
                                   logs_dir=Path(root) / "logs", fsync=fsync))  # fmt: skip
    _store_each(store, "warm", 20)  # the queue's directories and index exist before timing
    workers = [threading.Thread(target=_store_each, args=(store, f"t{i}", count))
               for i in range(threads)]  # fmt: skip
    started = time.monotonic()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    elapsed = time.monotonic() - started
    store.close()
    out.put(threads * count / elapsed)


def inprocess_each(root: Path, fsync: bool, threads: int, count: int) -> dict[str, float]:
    """Lifecycles/s of `threads` threads of one fresh process sharing one store."""
    out = CTX.Queue()
    proc = CTX.Process(target=_inprocess_each, args=(str(root), fsync, threads, count, out))
    proc.start()
    rate = out.get(timeout=600)
    proc.join()
    return {"rate": rate, "units": threads * count}


# -- batches: post_many, claim max, finish_many ----------------------------------------------


def _http_producer(url: str, token: str, batches: int, start: Any, out: Any) -> None:
    client = Client(url, token, timeout=60)
    start.wait()
    for b in range(batches):
        client.post_many(HOST, QUEUE, [{"item": {"b": b, "n": n}} for n in range(BATCH)])
    out.put(("posted", batches * BATCH, time.monotonic()))


def _http_worker(url: str, token: str, name: str, total: int, done: Any, out: Any) -> None:
    client = Client(url, token, timeout=60)
    finished = requests = 0
    last = 0.0  # when this worker's last batch finish returned (a final empty wait is not work)
    while done.value < total:
        tasks = client.claim(HOST, QUEUE, name, wait=1, max=BATCH)
        requests += 1
        if not tasks:
            continue
        outcomes = [{"id": t["id"], "attempt": t["attempts"], "outcome": "result",
                     "result": None} for t in tasks]  # fmt: skip
        answers = client.finish_many(HOST, QUEUE, name, outcomes)
        requests += 1
        ok = sum(1 for a in answers if a["status"] == 200)
        finished, last = finished + ok, time.monotonic()
        with done.get_lock():
            done.value += ok
    out.put(("drained", finished, last, requests))


def _store_producer(root: str, fsync: bool, batches: int, start: Any, out: Any) -> None:
    store = _store(root, fsync)
    start.wait()
    for b in range(batches):
        entries = [PostEntry(item={"b": b, "n": n}) for n in range(BATCH)]
        store.post_many(HOST, QUEUE, entries, settings=SETTINGS, posted_by="producer")
    store.close()
    out.put(("posted", batches * BATCH, time.monotonic()))


def _store_worker(root: str, fsync: bool, name: str, total: int, done: Any, out: Any) -> None:
    store = _store(root, fsync)
    finished, last = 0, 0.0
    while done.value < total:
        tasks = store.wait_claim(HOST, QUEUE, settings=SETTINGS, worker=name,
                                 wait_seconds=0.2, max_tasks=BATCH)  # fmt: skip
        if not tasks:
            continue
        reports = [Report(task_id=t.id, attempt=t.attempts, outcome="result") for t in tasks]
        answers = store.finish_many(HOST, QUEUE, reports, settings=SETTINGS, worker=name)
        ok = sum(1 for a in answers if isinstance(a, Reported))
        finished, last = finished + ok, time.monotonic()
        with done.get_lock():
            done.value += ok
    store.close()
    out.put(("drained", finished, last, 0))


def _store(root: str, fsync: bool) -> QueueStore:
    return QueueStore(StoreConfig(items_dir=Path(root) / "items",
                                  logs_dir=Path(root) / "logs", fsync=fsync))  # fmt: skip


def _batched(producer: Any, worker: Any, producer_args: tuple, worker_args: tuple,
             producers: int, workers: int, batches: int) -> dict[str, float]:  # fmt: skip
    total = producers * batches * BATCH
    start, done, out = CTX.Event(), CTX.Value("q", 0), CTX.Queue()
    wprocs = [CTX.Process(target=worker, args=(*worker_args, f"w{i}", total, done, out))
              for i in range(workers)]  # fmt: skip
    pprocs = [CTX.Process(target=producer, args=(*producer_args, batches, start, out))
              for _ in range(producers)]  # fmt: skip
    for p in (*wprocs, *pprocs):
        p.start()
    time.sleep(1.0)  # every worker is claiming (and waiting) before the first post
    started = time.monotonic()
    start.set()
    answers = [out.get(timeout=600) for _ in (*wprocs, *pprocs)]
    for p in (*wprocs, *pprocs):
        p.join()
    drained = [a for a in answers if a[0] == "drained"]
    finished = sum(a[1] for a in drained)
    last = max(a[2] for a in drained)
    requests = sum(a[3] for a in drained)
    return {"rate": finished / (last - started), "units": finished, "posted": total,
            "requests": requests * 100 / max(finished, 1)}  # fmt: skip


def http_batched(url: str, tokens: dict[str, str], producers: int, workers: int,
                 batches: int) -> dict[str, float]:  # fmt: skip
    """Drain rate over HTTP: from the producers' start to the last task's batch finish."""
    return _batched(_http_producer, _http_worker, (url, tokens["producer"]),
                    (url, tokens["worker"]), producers, workers, batches)  # fmt: skip


def inprocess_batched(root: Path, fsync: bool, producers: int, workers: int,
                      batches: int) -> dict[str, float]:  # fmt: skip
    """The same drain with the store called directly by producers + workers processes."""
    return _batched(_store_producer, _store_worker, (str(root), fsync), (str(root), fsync),
                    producers, workers, batches)  # fmt: skip


# -- the two targets: interleaved runs on their own servers ----------------------------------


def run_targets(
    runs: int, each_count: int, batches: int, which: frozenset[str] = frozenset({"each", "batched"})
) -> dict[str, Any]:
    """Both targets (or those in `which`), `runs` times each, in-process and HTTP runs
    interleaved. One at a time runs on a server with fsync off, batches on one with fsync on,
    each shaped as gunicorn.conf.py says (2 workers x 64 threads by default)."""
    report: dict[str, Any] = {"runs": runs}
    if "each" in which:
        report["each"] = _each(runs, each_count)
    if "batched" in which:
        report["batched"] = _batches(runs, batches)
    return report


def _each(runs: int, each_count: int) -> dict[str, Any]:
    found = _interleaved(
        False,
        runs,
        lambda root: inprocess_each(root, False, EACH_CLIENTS, each_count),
        lambda server: http_each(server.url, server.tokens, EACH_CLIENTS, each_count),
    )
    return {**found, "clients": EACH_CLIENTS, "lifecycles": EACH_CLIENTS * each_count,
            "fsync": False}  # fmt: skip


def _batches(runs: int, batches: int) -> dict[str, Any]:
    found = _interleaved(
        True,
        runs,
        lambda root: inprocess_batched(root, True, PRODUCERS, WORKERS, batches),
        lambda server: http_batched(server.url, server.tokens, PRODUCERS, WORKERS, batches),
    )
    return {**found, "producers": PRODUCERS, "workers": WORKERS, "batch": BATCH,
            "tasks": PRODUCERS * batches * BATCH, "fsync": True}  # fmt: skip


EACH_CLIENTS, PRODUCERS, WORKERS = 4, 2, 4
EACH_TARGET, BATCHED_TARGET = 0.30, 0.50


def _interleaved(fsync: bool, runs: int, inprocess: Any, http: Any) -> dict[str, Any]:
    server = Server(fsync=fsync, threads=configured_threads())
    try:
        server.prepare()
        server.start()
        http_each(server.url, server.tokens, 2, 10)  # warm up both workers: imports, memo
        local, remote, extra, cpu_local, cpu_remote = [], [], [], [], []
        for n in range(runs):
            children = _children_cpu()
            answer = inprocess(server.tmp / f"inprocess-{n}")
            local.append(answer["rate"])
            cpu_local.append((_children_cpu() - children) * 1000 / answer["units"])
            children, serving = _children_cpu(), server.cpu_seconds()
            answer = http(server)
            remote.append(answer["rate"])
            extra.append(answer)
            used = _children_cpu() - children + server.cpu_seconds() - serving
            cpu_remote.append(used * 1000 / answer["units"])
    finally:
        server.stop()
    # requests per lifecycle (one at a time), or the workers' requests per 100 tasks (batches)
    requests = statistics.fmean(a["requests"] for a in extra)
    # CPU ms per lifecycle or drained task, all processes of the run: the rates move with the
    # shared machine's load, these much less (HTTP: the server's and the clients' together)
    return {"inprocess": local, "http": remote, "requests": requests,
            "inprocess_cpu_ms": cpu_local, "http_cpu_ms": cpu_remote}  # fmt: skip


def _children_cpu() -> float:
    """User + system CPU seconds of this process's joined children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def spread(values: list[float]) -> str:
    """The median, with min-max when there are several."""
    text = f"{statistics.median(values):,.0f}"
    return text if len(values) == 1 else f"{text} ({min(values):,.0f}-{max(values):,.0f})"


def target_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """http_bench's table rows for the two targets, medians beside their same-run baselines."""
    rows = []
    for key, name, target in (
        ("each", "one at a time, 4 clients, fsync off", EACH_TARGET),
        ("batched", "batches of 100, 2+4 clients, fsync on", BATCHED_TARGET),
    ):
        found = report.get(key)
        if not found:
            continue
        ratio = statistics.median(found["http"]) / statistics.median(found["inprocess"])
        verdict = "met" if ratio >= target else "MISSED"
        unit = "lifecycles/s" if key == "each" else "drained/s"
        rows.append(
            (
                f"HTTP {name}",
                f"{statistics.median(found['http']):,.0f} /s",
                f"{unit}, {spread(found['http'])} over {report['runs']} runs; "
                f"= {ratio:.0%} of in-process (target >= {target:.0%}: {verdict})",
            )
        )
        rows.append(("  in-process, same work", f"{statistics.median(found['inprocess']):,.0f} /s",
                     f"{unit}, {spread(found['inprocess'])}, the baseline"))  # fmt: skip
        per = "lifecycle" if key == "each" else "task"
        rows.append((f"  CPU per {per}", f"{statistics.median(found['http_cpu_ms']):.2f} ms",
                     f"HTTP, server and clients (in-process: "
                     f"{statistics.median(found['inprocess_cpu_ms']):.2f} ms); "
                     f"{found['requests']:.2f} requests per "
                     f"{'lifecycle' if key == 'each' else '100 tasks (workers)'}"))  # fmt: skip
    return rows
