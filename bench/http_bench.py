"""HTTP benchmark: taskhoster through gunicorn on loopback, against a trivial DRF endpoint.

    .venv/bin/python bench/http_bench.py [--tasks 2000] [--waiters 100] [--threads 8] ...

Starts its own gunicorn on a throw-away SQLite database and directories, then measures, in
one run so the machine's noise hits both: the ceiling (POST /bench/noop, a trivial
bearer-authenticated DRF view served from bench/http_bench_urls.py), lifecycles per second
(post, claim, result, fetch; 4 producers and 4 workers), the post -> waiting-claim latency,
and the same with 100 claims waiting on another queue (other requests' latency, RSS).

Then issue 11's two HTTP targets on fresh servers (bench/http_bench_targets.py), each run
interleaved with the same work done in-process: one at a time (4 clients, fsync off) and
batches (2 producers posting 100 at a time, 4 workers claiming max 100 and finishing in one
request, fsync on). --json saves them for bench/results.py; --only-targets runs just those.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from http_bench_load import (  # noqa: E402
    Waiters,
    claim_latency,
    cpu_per_unit,
    durable_write_ms,
    lifecycles,
    noop_rate,
)
from http_bench_server import Server, configured_threads  # noqa: E402
from http_bench_targets import run_targets, target_rows  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2000, help="lifecycles to run")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="worker client processes")
    parser.add_argument("--clients", type=int, default=8, help="processes for the ceiling")
    parser.add_argument("--seconds", type=float, default=5.0, help="each ceiling measurement")
    parser.add_argument("--samples", type=int, default=200, help="post -> claim latencies")
    parser.add_argument("--waiters", type=int, default=100, help="claims held waiting at once")
    parser.add_argument("--worker-class", default="gthread")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="default: gunicorn.conf.py's")
    parser.add_argument("--fsync", type=int, choices=(0, 1), default=1)
    parser.add_argument("--skip", default="",
                        help="comma list: lifecycles,latency,waiters,targets")  # fmt: skip
    parser.add_argument("--only-targets", action="store_true", help="issue 11's targets only")
    parser.add_argument("--targets", default="each,batched", help="which: each,batched")
    parser.add_argument("--runs", type=int, default=3, help="of each target, interleaved")
    parser.add_argument("--each-count", type=int, default=250,
                        help="one-at-a-time lifecycles per client and run")  # fmt: skip
    parser.add_argument("--batches", type=int, default=25,
                        help="batches of 100 per producer and run")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="write the targets' figures")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    skip = set(filter(None, args.skip.split(",")))
    threads = args.threads if args.threads is not None else configured_threads()
    rows: list[tuple[str, str, str]] = []
    if not args.only_targets:
        rows += site_rows(args, skip, threads)
    if "targets" not in skip:
        which = frozenset(filter(None, args.targets.split(",")))
        report = run_targets(args.runs, args.each_count, args.batches, which)
        rows += target_rows(report)
        if args.json is not None:
            args.json.write_text(json.dumps(report, indent=1))
    print_table(args, threads, rows)


def site_rows(args: argparse.Namespace, skip: set[str], threads: int) -> list:
    """The ceiling, lifecycles, latency and waiters, all on one server."""
    server = Server(worker_class=args.worker_class, workers=args.web_workers,
                    threads=threads, fsync=bool(args.fsync))  # fmt: skip
    rows: list[tuple[str, str, str]] = []
    try:
        server.prepare()
        server.start()
        noop_rate(server.url, server.tokens["producer"], 2, 1.0)  # warm up both workers
        ceiling, noop_server_ms, noop_client_ms = cpu_per_unit(
            server,
            lambda: noop_rate(server.url, server.tokens["producer"], args.clients, args.seconds),
        )
        rows.append(("trivial DRF POST (ceiling)", f"{ceiling['rps']:.0f} req/s",
                     f"p50 {ceiling['p50_ms']:.1f} ms, p99 {ceiling['p99_ms']:.1f} ms, "
                     f"{ceiling['errors']} errors, {args.clients} clients; CPU per "
                     f"request: server {noop_server_ms:.2f} ms, "
                     f"clients {noop_client_ms:.2f} ms"))  # fmt: skip
        if "lifecycles" not in skip:
            life, life_server_ms, life_client_ms = cpu_per_unit(
                server,
                lambda: lifecycles(
                    server.url, server.tokens, args.producers, args.workers, args.tasks
                ),
            )
            # The shared machine's load moves the ceiling severalfold within a minute, so it is
            # measured again right after the lifecycles and the ratio uses the mean of the two.
            again = noop_rate(server.url, server.tokens["producer"], args.clients, args.seconds)
            mean = (ceiling["rps"] + again["rps"]) / 2
            cost = mean / life["lifecycles_per_s"]
            rows.append(("trivial DRF POST again (after)", f"{again['rps']:.0f} req/s",
                         f"p50 {again['p50_ms']:.1f} ms; the ratio uses the mean, "
                         f"{mean:.0f} req/s"))  # fmt: skip
            rows.append(("lifecycles (post,claim,result,fetch)",
                         f"{life['lifecycles_per_s']:.0f} /s",
                         f"= {cost:.1f} trivial requests each (target <= 5); "
                         f"{life['requests_per_lifecycle']:.2f} requests per lifecycle; "
                         f"{life['fetched']} fetched, {life['claimed']} claimed"))  # fmt: skip
            rows.append(("  CPU per lifecycle", f"{life_server_ms:.1f} ms",
                         f"server (= {life_server_ms / noop_server_ms:.1f} trivial requests' "
                         f"server CPU); clients {life_client_ms:.1f} ms "
                         f"(= {life_client_ms / noop_client_ms:.1f})"))  # fmt: skip
        if "latency" not in skip:
            floor = durable_write_ms(server.tmp)
            rows.append(("one durable write alone (disk floor)", f"p99 {floor['p99_ms']:.1f} ms",
                         f"p50 {floor['p50_ms']:.2f} ms: write, fsync, rename, fsync dir; "
                         f"post then claim make 6 fsyncs"))  # fmt: skip
            lat = claim_latency(server.url, server.tokens, args.samples)
            note = (f"p50 {lat['p50_ms']:.1f} ms, {lat['samples']} samples (target p99 <= 10 ms); "
                    f"after the post's answer: p50 {lat['after_answer_p50_ms']:.1f}, "
                    f"p99 {lat['after_answer_p99_ms']:.1f} ms")  # fmt: skip
            rows.append(("post -> waiting claim", f"p99 {lat['p99_ms']:.1f} ms", note))
        if "waiters" not in skip:
            rows += with_waiters(server, args, ceiling)
    finally:
        server.stop()
    return rows


def with_waiters(server: Server, args: argparse.Namespace, ceiling: dict[str, float]) -> list:
    rss_before = server.rss_mb()
    idle = noop_rate(server.url, server.tokens["producer"], 4, args.seconds)
    with Waiters(server.url, server.tokens["worker"], args.waiters):
        busy = noop_rate(server.url, server.tokens["producer"], 4, args.seconds)
        rss_after = server.rss_mb()
        lat = claim_latency(server.url, server.tokens, min(args.samples, 100))
    slower = busy["rps"] / idle["rps"] - 1
    return [
        ("trivial POST, 4 clients, no waiters", f"{idle['rps']:.0f} req/s",
         f"p50 {idle['p50_ms']:.1f} ms, p99 {idle['p99_ms']:.1f} ms, max {idle['max_ms']:.0f} ms"),
        (f"same with {args.waiters} claims waiting", f"{busy['rps']:.0f} req/s",
         f"p50 {busy['p50_ms']:.1f} ms, p99 {busy['p99_ms']:.1f} ms, max {busy['max_ms']:.0f} ms, "
         f"{busy['errors']} errors; req/s {slower:+.0%} (target >= -20%)"),
        (f"RSS with {args.waiters} waiting", f"{rss_after:.0f} MB",
         f"{rss_after - rss_before:+.0f} MB vs {rss_before:.0f} MB idle (target <= +100 MB)"),
        (f"post -> waiting claim, {args.waiters} waiting", f"p99 {lat['p99_ms']:.1f} ms",
         f"p50 {lat['p50_ms']:.1f} ms, {lat['samples']} samples, {lat['missed']} timed out"),
    ]  # fmt: skip


def print_table(args: argparse.Namespace, threads: int, rows: list) -> None:
    print(f"\n$ {shlex.join([sys.executable, *sys.argv])}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    fsync = (
        "fsync as each row says" if args.only_targets else f"fsync {'on' if args.fsync else 'off'}"
    )
    print(f"gunicorn {args.worker_class}, {args.web_workers} workers x {threads} threads, "
          f"{fsync}, loopback, 2-core machine shared "
          f"(load average at the end {load})\n")  # fmt: skip
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>14}  {note}")


if __name__ == "__main__":
    main()
