"""Which gunicorn worker class: trivial DRF requests/s, and what 100 waiting claims do to it.

    .venv/bin/python bench/gunicorn_compare.py [--rounds 3] [--seconds 3] [--waiters 100]
                                               [--uvicorn-path DIR]

Every configuration runs at once (each its own gunicorn, idle when not measured) and the
ceiling is measured round-robin, so the noise of this shared 2-core machine hits them alike.
`--uvicorn-path` adds uvicorn (ASGI, 2 workers) from a directory where it was installed with
`pip install --target DIR uvicorn`; it is not a dependency of taskhoster.
"""

from __future__ import annotations

import argparse
import shlex
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from http_bench_load import Waiters, noop_rate  # noqa: E402
from http_bench_server import ROOT, Server  # noqa: E402

ASGI_MODULE = (
    "from django.core.asgi import get_asgi_application\napplication = get_asgi_application()\n"
)


class Uvicorn(Server):
    """The same throw-away site served by uvicorn: Django's ASGI handler, sync views."""

    uvicorn_path: str = ""

    def start(self) -> None:
        (self.tmp / "asgi_app.py").write_text(ASGI_MODULE)
        env = self.env()
        env["PYTHONPATH"] = f"{self.uvicorn_path}:{self.tmp}:{env['PYTHONPATH']}"
        argv = [sys.executable, "-m", "uvicorn", "--workers", str(self.workers),
                "--port", str(self.port), "--log-level", "warning", "--no-access-log",
                "asgi_app:application"]  # fmt: skip
        self.proc = subprocess.Popen(argv, env=env, cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("uvicorn did not start")


def configurations(args: argparse.Namespace) -> dict[str, Server]:
    found: dict[str, Server] = {
        "sync, 2 workers": Server(worker_class="sync", threads=1),
        "gthread, 2 x 4 threads": Server(threads=4),
        "gthread, 2 x 8 threads": Server(threads=8),
        "gthread, 2 x 64 threads": Server(threads=64),
    }
    if args.uvicorn_path:
        Uvicorn.uvicorn_path = args.uvicorn_path
        found["uvicorn ASGI, 2 workers"] = Uvicorn()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--waiters", type=int, default=100)
    parser.add_argument("--uvicorn-path", default="")
    args = parser.parse_args()
    servers = configurations(args)
    rates: dict[str, list[float]] = {name: [] for name in servers}
    rows = []
    try:
        for server in servers.values():
            server.fsync = False
            server.prepare()
            server.start()
            noop_rate(server.url, server.tokens["producer"], 2, 1.0)  # warm-up
        for _ in range(args.rounds):
            for name, server in servers.items():
                rate = noop_rate(server.url, server.tokens["producer"], args.clients, args.seconds)
                rates[name].append(rate["rps"])
        for name, server in servers.items():
            rss = server.rss_mb()
            with Waiters(server.url, server.tokens["worker"], args.waiters):
                busy = noop_rate(server.url, server.tokens["producer"], args.clients, args.seconds)
                rss_busy = server.rss_mb()
            rows.append((name, statistics.median(rates[name]), busy, rss_busy - rss))
    finally:
        for server in servers.values():
            server.stop()
    base = rows[0][1]
    print(f"\n$ {shlex.join([sys.executable, *sys.argv])}")
    print(f"trivial bearer-authenticated DRF POST, {args.clients} keep-alive clients, median of "
          f"{args.rounds} round-robin rounds of {args.seconds:.0f} s; then {args.waiters} claims "
          "held waiting on an empty queue\n")  # fmt: skip
    print(f"{'server':<26} {'req/s':>7} {'vs sync':>8} | {'req/s, waiters':>15} "
          f"{'p50 ms':>8} {'errors':>7} {'RSS +MB':>8}")  # fmt: skip
    for name, rps, busy, rss in rows:
        print(f"{name:<26} {rps:>7.0f} {rps / base:>7.2f}x | {busy['rps']:>15.0f} "
              f"{busy['p50_ms']:>8.1f} {busy['errors']:>7} {rss:>+8.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
