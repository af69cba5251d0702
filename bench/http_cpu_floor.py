"""Where a task's server CPU goes over HTTP, one client, one at a time: the same lifecycle (a
post, then a result that claims the next task, as the worker loop sends them) on a gunicorn of
the production layout, with the store's flushes on (fsync on, TASKHOSTER_FLUSH's default), off,
and off on a tmpfs (what is left when the disk's own work is gone: Python, Django, gunicorn and
the system calls' cheapest form), beside a trivial bearer-authenticated DRF POST.

    .venv/bin/python bench/http_cpu_floor.py [--tasks 1000] [--rounds 3] [--without-next]
        [--setups flushes-off,tmpfs]

Server CPU is gunicorn's master and workers' user + system time from /proc, read around each
phase (10 ms ticks: 1,000 tasks make a tick 0.01 ms a task). The set-ups take turns round after
round; each figure is the median of the rounds. The machine is shared: the CPU a request uses
moves less with load than its time does, but it moves (cache misses, a busier disk).
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from http_bench_server import HOST, QUEUE, Server, configured_threads  # noqa: E402

from taskhoster.client import Client  # noqa: E402

SETUPS = {  # name: (fsync, directory for the store, None: the system's temp directory)
    "flushes-on": (True, None),
    "flushes-off": (False, None),
    "tmpfs": (False, "/dev/shm"),  # flushes off too
}


def phases(server: Server, tasks: int, with_next: bool = True) -> dict[str, float]:
    """Server CPU in ms a task: the posts, the drain (claim, then results claiming the next),
    and a trivial request."""
    producer = Client(server.url, server.tokens["producer"], timeout=60)
    worker = Client(server.url, server.tokens["worker"], timeout=60)

    def cpu(work: Any) -> float:
        before = server.cpu_seconds()
        work()
        return (server.cpu_seconds() - before) / tasks * 1000

    def drain() -> None:
        task: Any = worker.claim(HOST, QUEUE, "floor")
        while task:
            if not with_next:  # a claim and a result a task, as before `next`
                worker.result(HOST, QUEUE, task["id"], "floor", task["attempts"], {})
                task = worker.claim(HOST, QUEUE, "floor")
                continue
            answer = worker.result(HOST, QUEUE, task["id"], "floor", task["attempts"], {},
                                   claim_next={})  # fmt: skip
            task = answer["next"][0] if answer.get("next") else None

    def noop() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        headers = {"Authorization": f"Bearer {server.tokens['producer']}",
                   "Content-Type": "application/json", "Accept": "application/json"}  # fmt: skip
        for _ in range(tasks):
            conn.request("POST", "/bench/noop", body=b'{"a":1}', headers=headers)
            conn.getresponse().read()
        conn.close()

    post = cpu(lambda: [producer.post(HOST, QUEUE, {"n": n}) for n in range(tasks)])
    return {"post": post, "drain": cpu(drain), "trivial request": cpu(noop)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--without-next",
        action="store_true",
        help="drain with a claim and a result a task (a server before next)",
    )
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma-separated")
    args = parser.parse_args()
    names = args.setups.split(",")
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for round_no in range(args.rounds):
        for name in names[round_no % len(names) :] + names[: round_no % len(names)]:
            fsync, where = SETUPS[name]
            server = Server(workers=2, threads=configured_threads(), fsync=fsync,
                            tmp=Path(tempfile.mkdtemp(prefix="th-floor-", dir=where)))  # fmt: skip
            try:
                server.prepare()
                server.start()
                phases(server, 50, not args.without_next)  # warm: imports, memos, day-file
                rows[name].append(phases(server, args.tasks, not args.without_next))
            finally:
                server.stop()
            print(f"round {round_no + 1} {name:<20} " + ", ".join(
                f"{k} {v:.2f}" for k, v in rows[name][-1].items()), flush=True)  # fmt: skip
    print(f"\n$ {' '.join([sys.executable, *sys.argv])}")
    print(
        f"server CPU in ms, median of {args.rounds} rounds of {args.tasks:,} tasks; "
        "2-core machine shared with other work\n"
    )
    print(f"{'set-up':<20} {'post':>6} {'drain':>6} {'a task':>7} {'trivial request':>16}")
    for name, got in rows.items():
        post, drain, noop = (statistics.median(r[k] for r in got)
                             for k in ("post", "drain", "trivial request"))  # fmt: skip
        print(f"{name:<20} {post:>6.2f} {drain:>6.2f} {post + drain:>7.2f} {noop:>16.2f}")


if __name__ == "__main__":
    main()
