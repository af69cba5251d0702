"""Server metrics benchmark: request throughput with the server's own figures on (request
durations, flushes, held threads, in prometheus_client's multiprocess files) against off
(TASKHOSTER_SERVER_METRICS=0), as a ratio of the same run.

Two throw-away gunicorns (2 gthread workers x 8 threads, fsync on), one of each, both running
the whole time and measured in turns (which goes first alternates), so the noise of a shared
machine hits them alike. Each turn: `--clients` keep-alive client processes for `--seconds`,
on two loads: the trivial bearer-authenticated DRF POST of http_bench (the ceiling, where a
fixed cost per request weighs most) and real posts to a queue (the store, its flush timed).
The verdict is each load's median of the per-round ratios, against 0.95.

Run: .venv/bin/python bench/server_metrics_bench.py [--rounds 5] [--seconds 3] [--clients 4]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from http_bench_load import CTX  # noqa: E402
from http_bench_server import HOST, QUEUE, Server  # noqa: E402

from queues.metrics import multiproc  # noqa: E402

TARGET = 0.95  # metrics on keeps at least this share of the throughput with them off
TOKEN = "bench-metrics-token"
LOADS = {
    "noop": ("/bench/noop", b'{"a":1}', "worker"),
    "post": (f"/api/v1/queues/{HOST}/{QUEUE}/tasks", b'{"n":1}', "producer"),
}


@dataclass
class MetricsServer(Server):
    metrics: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return {**super().env(), "TASKHOSTER_SERVER_METRICS": "1" if self.metrics else "0",
                "TASKHOSTER_METRICS_TOKEN": TOKEN}  # fmt: skip

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(multiproc.root(self.tmp / "var"), ignore_errors=True)  # in /dev/shm


def _loop(url: str, path: str, body: bytes, token: str, seconds: float, out: Any) -> None:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    done = errors = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status >= 300:
                errors += 1
            done += 1
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
    out.put((done, errors))


def rate(server: Server, load: str, clients: int, seconds: float) -> tuple[float, float, int]:
    """(requests/s, the server's CPU ms per request, errors) of `clients` processes on one
    load."""
    path, body, who = LOADS[load]
    out = CTX.Queue()
    args = (server.url, path, body, server.tokens[who], seconds, out)
    procs = [CTX.Process(target=_loop, args=args) for _ in range(clients)]
    cpu, started = server.cpu_seconds(), time.monotonic()
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 60) for _ in procs]
    elapsed, cpu = time.monotonic() - started, server.cpu_seconds() - cpu
    for p in procs:
        p.join()
    done = sum(n for n, _ in results)
    return done / elapsed, cpu * 1000 / max(done, 1), sum(e for _, e in results)


def counted_requests(server: Server) -> float:
    """The requests /metrics has counted (0 when the server's figures are off)."""
    request = urllib.request.Request(f"{server.url}/metrics")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    from prometheus_client.parser import text_string_to_metric_families

    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "taskhoster_request_duration_seconds_count")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    load_at_start = os.getloadavg()[0]
    servers = {"on": MetricsServer(metrics=True), "off": MetricsServer(metrics=False)}
    try:
        for server in servers.values():
            server.prepare()
            server.start()
        for server in servers.values():  # warm: first requests load code and caches
            for load in LOADS:
                rate(server, load, args.clients, 1.0)  # (its figures thrown away)
        rates: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        errors = 0
        for n in range(args.rounds):
            order = ["on", "off"] if n % 2 == 0 else ["off", "on"]
            for load in LOADS:
                for name in order:
                    got, ms, failed = rate(servers[name], load, args.clients, args.seconds)
                    rates.setdefault((load, name), []).append(got)
                    cpu.setdefault((load, name), []).append(ms)
                    errors += failed
        counted = {name: counted_requests(s) for name, s in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    ratios, cpu_ratios = {}, {}
    print(f"{args.rounds} rounds x {args.seconds:g} s, {args.clients} clients, 2 gthread "
          f"workers x 8 threads each, fsync on")  # fmt: skip
    for load in LOADS:
        on, off = rates[(load, "on")], rates[(load, "off")]
        ratios[load] = statistics.median(a / b for a, b in zip(on, off, strict=True))
        print(f"{load:5}  on {statistics.median(on):7.1f} req/s  off {statistics.median(off):7.1f}"
              f" req/s  on/off {ratios[load]:.3f} (per round: "
              f"{', '.join(f'{a / b:.3f}' for a, b in zip(on, off, strict=True))})")  # fmt: skip
        on_ms, off_ms = cpu[(load, "on")], cpu[(load, "off")]
        cpu_ratios[load] = statistics.median(a / b for a, b in zip(on_ms, off_ms, strict=True))
        print(f"       server CPU per request: on {statistics.median(on_ms):.2f} ms, off "
              f"{statistics.median(off_ms):.2f} ms, on/off {cpu_ratios[load]:.3f}")  # fmt: skip
    print(
        f"requests counted by /metrics: on {counted['on']:.0f}, off {counted['off']:.0f}; "
        f"errors {errors}"
    )
    print(json.dumps({"ratios": ratios, "cpu_ratios": cpu_ratios, "errors": errors}))
    worst = min(ratios.values())
    verdict = "meets" if worst >= TARGET and errors == 0 and counted["off"] == 0 else "MISSES"
    print(f"metrics on/off {worst:.3f}: {verdict} the {TARGET:.2f} target")
    print(f"load average {os.getloadavg()[0]:.2f} at the end (started at {load_at_start:.2f})")
    sys.exit(0 if verdict == "meets" else 1)


if __name__ == "__main__":
    main()
