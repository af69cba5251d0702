"""The benchmark's load: client processes on loopback, each loop bounded in count and time."""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import os
import queue
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from http_bench_server import HOST, IDLE_QUEUE, QUEUE

from queues.store import files
from taskhoster.client import Client

CTX = mp.get_context("fork")  # the children only run loops over sockets
TERMINAL = {"finished", "failed", "cancelled"}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


# -- the ceiling: a trivial DRF POST -------------------------------------------------------


def _noop_loop(url: str, token: str, seconds: float, out: Any) -> None:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies, errors = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            conn.request("POST", "/bench/noop", body=b'{"a":1}', headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                errors += 1
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            continue
        latencies.append(time.monotonic() - started)
    out.put((latencies, errors))


def noop_rate(url: str, token: str, clients: int, seconds: float) -> dict[str, float]:
    """Requests/s of `clients` processes each POSTing /bench/noop for `seconds`."""
    out = CTX.Queue()
    args = (url, token, seconds, out)
    procs = [CTX.Process(target=_noop_loop, args=args) for _ in range(clients)]
    started = time.monotonic()
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 60) for _ in procs]
    elapsed = time.monotonic() - started
    for p in procs:
        p.join()
    latencies = [x for lat, _ in results for x in lat]
    return {
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "max_ms": max(latencies, default=float("nan")) * 1000,
        "errors": sum(e for _, e in results),
    }


# -- lifecycles: post, claim, result, fetch ------------------------------------------------


def _producer(url: str, token: str, count: int, window: int, out: Any) -> None:
    client = Client(url, token, timeout=30)
    posted: list[dict[str, Any]] = []
    fetched = requests = 0

    def fetch(task_id: str) -> None:
        nonlocal requests
        task = client.get(HOST, QUEUE, task_id)
        requests += 1
        for _ in range(100):  # a bounded wait for the worker side
            if task["status"] in TERMINAL:
                return
            task = client.get(HOST, QUEUE, task["id"], wait=10, since=task["updatedAt"])
            requests += 1

    for n in range(count):
        posted.append(client.post(HOST, QUEUE, {"n": n}))
        requests += 1
        if len(posted) > window:
            fetch(posted.pop(0)["id"])
            fetched += 1
    for task in posted:
        fetch(task["id"])
        fetched += 1
    out.put((fetched, requests))


def _worker(url: str, token: str, name: str, stop: Any, out: Any) -> None:
    client = Client(url, token, timeout=30)
    done = requests = 0
    while not stop.is_set():
        task = client.claim(HOST, QUEUE, name, wait=1)
        requests += 1
        if isinstance(task, dict):
            client.result(HOST, QUEUE, task["id"], name, task["attempts"], {"ok": True})
            done += 1
            requests += 1
    out.put((done, requests))


def lifecycles(url: str, tokens: dict[str, str], producers: int, workers: int,
               tasks: int, window: int = 8) -> dict[str, float]:  # fmt: skip
    out, stop = CTX.Queue(), CTX.Event()
    wprocs = [CTX.Process(target=_worker, args=(url, tokens["worker"], f"w{i}", stop, out))
              for i in range(workers)]  # fmt: skip
    args = (url, tokens["producer"], tasks // producers, window, out)
    pprocs = [CTX.Process(target=_producer, args=args) for _ in range(producers)]
    for p in wprocs:
        p.start()
    time.sleep(0.5)  # the workers are waiting before the first post
    started = time.monotonic()
    for p in pprocs:
        p.start()
    produced = [out.get(timeout=600) for _ in pprocs]
    elapsed = time.monotonic() - started
    stop.set()
    worked = [out.get(timeout=60) for _ in wprocs]
    for p in (*pprocs, *wprocs):
        p.join()
    fetched = sum(n for n, _ in produced)
    requests = sum(r for _, r in produced) + sum(r for _, r in worked)
    return {"lifecycles_per_s": fetched / elapsed, "fetched": fetched,
            "claimed": sum(n for n, _ in worked), "seconds": elapsed,
            "requests_per_lifecycle": requests / max(fetched, 1)}  # fmt: skip


def cpu_per_unit(server: Any, run: Any) -> tuple[dict[str, float], float, float]:
    """Run a load; its result, and the CPU milliseconds per unit the server and the client
    processes (children of this one, joined by then) used. A unit: a request or a lifecycle."""
    server_before = server.cpu_seconds()
    clients = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run()
    clients_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    units = result.get("requests", result.get("fetched", 0)) or 1
    server_ms = (server.cpu_seconds() - server_before) * 1000 / units
    client_s = (clients_after.ru_utime + clients_after.ru_stime) - (
        clients.ru_utime + clients.ru_stime
    )
    return result, server_ms, client_s * 1000 / units


# -- post -> waiting claim ------------------------------------------------------------------


def _latency_worker(url: str, token: str, samples: int, ready: Any, out: Any) -> None:
    client = Client(url, token, timeout=30)
    ready.set()
    taken, deadline = 0, time.monotonic() + 120
    while taken < samples and time.monotonic() < deadline:
        # None: the wait ran out, or a crowded process answered at once (Retry-After): ask again
        task = client.claim(HOST, QUEUE, "lat", wait=20)
        if isinstance(task, dict):
            taken += 1
            out.put((task["item"]["sent"], time.monotonic()))
            client.result(HOST, QUEUE, task["id"], "lat", task["attempts"], {})


def claim_latency(url: str, tokens: dict[str, str], samples: int) -> dict[str, float]:
    """Time from the start of a post to a waiting worker holding the task."""
    out, ready = CTX.Queue(), CTX.Event()
    proc = CTX.Process(target=_latency_worker, args=(url, tokens["worker"], samples, ready, out))
    proc.start()
    ready.wait(10)
    client = Client(url, tokens["producer"], timeout=30)
    latencies, after_answer, missed = [], [], 0
    for _ in range(samples):
        time.sleep(0.02)  # the worker is back in its waiting claim
        try:
            client.post(HOST, QUEUE, {"sent": time.monotonic()})
            answered = time.monotonic()
            sent, claimed = out.get(timeout=10)
        except (OSError, queue.Empty):
            missed += 1  # the server had no thread left for the claim (or the post)
            break
        latencies.append(claimed - sent)
        after_answer.append(claimed - answered)  # the wake-up's share, without the post's
    proc.join(5)
    proc.kill()
    return {"p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
            "mean_ms": statistics.fmean(latencies) * 1000 if latencies else float("nan"),
            "after_answer_p50_ms": percentile(after_answer, 0.5) * 1000,
            "after_answer_p99_ms": percentile(after_answer, 0.99) * 1000,
            "samples": len(latencies), "missed": missed}  # fmt: skip


# -- many waiting workers -------------------------------------------------------------------


def _waiters(url: str, token: str, count: int, stop: Any, holding: Any) -> None:
    client = Client(url, token, timeout=30)

    def wait_loop(i: int) -> None:
        while not stop.is_set():
            holding.release()
            try:
                client.claim(HOST, IDLE_QUEUE, f"idle{i}", wait=15)
            except OSError:
                return

    threads = [threading.Thread(target=wait_loop, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    stop.wait(300)


class Waiters:
    """`count` claims waiting on an empty queue, held from one process of threads."""

    def __init__(self, url: str, token: str, count: int) -> None:
        self.stop, self.holding = CTX.Event(), CTX.Semaphore(0)
        self.proc = CTX.Process(target=_waiters, args=(url, token, count, self.stop, self.holding))
        self.count = count

    def __enter__(self) -> Waiters:
        self.proc.start()
        for _ in range(self.count):
            self.holding.acquire(timeout=30)
        time.sleep(1.0)  # the last claims reach the server and start waiting
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.proc.kill()  # their sockets close; the server's threads end with their wait
        self.proc.join()


def dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


# -- the disk's own floor -------------------------------------------------------------------


def durable_write_ms(directory: Path, samples: int = 200) -> dict[str, float]:
    """One durable write as the store makes it (temp, fsync, rename, fsync of the directory),
    timed alone on the file system the server writes to: the floor under every transition."""
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
        try:
            times = []
            for n in range(samples):
                time.sleep(0.005)  # the same idle gaps as the latency run
                started = time.monotonic()
                files.write_durable(fd, f"{n}.json", b"x" * 400, fsync=True)
                times.append(time.monotonic() - started)
        finally:
            os.close(fd)
    return {"p50_ms": percentile(times, 0.5) * 1000, "p99_ms": percentile(times, 0.99) * 1000}
