"""What the server's own figures cost a request, counted rather than timed: instructions
(callgrind) and system calls (strace) per request through Django's WSGI handler, the server's
figures on (multiprocess files, as in a gunicorn worker) against off.

    .venv/bin/python bench/metrics_counts.py [--requests 200] [--warm 100] [--no-strace]
        [--no-callgrind] [--profile]

Each count is the difference of two runs of a fresh process, one of `warm` requests and one of
`warm + requests`, divided by `requests` (bench/cpu_counts.py's method): the start, the imports
and the first requests cancel out. Counts need no quiet machine: the same code executes
(nearly) the same instructions on any load. Two loads, as bench/server_metrics_bench.py: the
trivial bearer-authenticated DRF POST (`noop`) and real posts to a queue (`post`, fsync off).
`--profile` prints cProfile's top functions of a metrics-on run instead; `--observe` times
`observe_request` alone in multiprocess mode (CPU time per call, the best of 5 x 100,000).
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from http_bench_server import HOST, QUEUE, Server  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LOADS = {
    "noop": ("/bench/noop", b'{"a":1}', "worker"),
    "post": (f"/api/v1/queues/{HOST}/{QUEUE}/tasks", b'{"n":1}', "producer"),
}


def workload(load: str, requests: int, token: str, var_dir: str, metrics: bool) -> None:
    """Serve `requests` requests of `load` through the WSGI handler (the measured child)."""
    if metrics:
        from queues.metrics import server

        server.start("web", var_dir)  # as gunicorn.conf.py's on_starting does for its workers
    from taskhoster_site.wsgi import application

    path, body, _ = LOADS[load]
    statuses: list[str] = []

    def start_response(status: str, headers: object, exc_info: object = None) -> None:
        statuses.append(status)

    for _ in range(requests):
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "HTTP_HOST": "127.0.0.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_AUTHORIZATION": f"Bearer {token}",
            "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        response = application(environ, start_response)
        b"".join(response)
        response.close()
    failed = [s for s in statuses if not s.startswith("2")]
    if failed:
        raise SystemExit(f"{len(failed)} requests failed: {failed[:3]}")


def _child(site: Server, load: str, requests: int, metrics: bool, tool: list[str]) -> str:
    """Run the workload in a fresh process of `tool` (which ends with the interpreter); its
    stderr."""
    with tempfile.TemporaryDirectory(prefix="th-metrics-counts-") as tmp:
        # each run on a copy of the prepared site: the posts of the runs before it would
        # otherwise make its queue deeper than theirs, and its posts dearer
        own = Path(tmp) / "site"
        shutil.copytree(site.tmp, own)
        env = {
            **site.env(),
            "DATABASE_URL": f"sqlite:///{own / 'db.sqlite3'}",
            "TASKHOSTER_ITEMS_DIR": str(own / "items"),
            "TASKHOSTER_LOGS_DIR": str(own / "logs"),
            # tokens and queue settings remembered for the whole run: their look-ups would
            # otherwise come every 2 s of wall time, as many as the run's length under callgrind
            "TASKHOSTER_API_MEMO_SECONDS": "3600",
            "PYTHONHASHSEED": "0",
            "TASKHOSTER_FSYNC": "0",
            "TASKHOSTER_SERVER_METRICS": "1" if metrics else "0",
            "TASKHOSTER_METRICS_DIR": str(Path(tmp) / "metrics"),
        }
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        token = site.tokens[LOADS[load][2]]
        argv = [*tool, __file__, "--child", load, str(requests), token, tmp,
                "1" if metrics else "0"]  # fmt: skip
        run = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
        if run.returncode != 0:
            raise SystemExit(f"{' '.join(argv[:3])} ... failed:\n{run.stderr[-3000:]}")
        return run.stderr


def instructions(site: Server, load: str, requests: int, metrics: bool) -> int:
    tool = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
    err = _child(site, load, requests, metrics, tool)
    found = re.search(r"Collected : (\d+)", err)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{err[-2000:]}")
    return int(found.group(1))


def syscalls(site: Server, load: str, requests: int, metrics: bool) -> int:
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        _child(
            site, load, requests, metrics, ["strace", "-f", "-c", "-o", out.name, sys.executable]
        )
        text = Path(out.name).read_text()
    calls = 0
    for line in text.splitlines():
        fields = line.split()
        # "% time seconds usecs/call calls [errors] syscall", the total line last
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            calls += int(fields[3])
    return calls


def profile(site: Server, load: str, requests: int) -> None:
    """cProfile's top functions of `requests` requests with the figures on."""
    with tempfile.NamedTemporaryFile(suffix=".prof") as out:
        tool = [sys.executable, "-m", "cProfile", "-o", out.name]
        _child(site, load, requests, True, tool)
        stats = pstats.Stats(out.name)
        stats.sort_stats("tottime").print_stats(r"queues/metrics|prometheus_client", 30)


def observe_alone() -> None:
    """CPU time of one `observe_request` in multiprocess mode, without Django's stack."""
    with tempfile.TemporaryDirectory(prefix="th-metrics-counts-") as tmp:
        os.environ["TASKHOSTER_METRICS_DIR"] = str(Path(tmp) / "metrics")
        from queues.metrics import server

        server.start("web", tmp)
        calls, times = 100_000, []
        for _ in range(5):
            started = time.process_time()
            for _ in range(calls):
                server.observe_request("queues:api:tasks", "POST", 201, 0.003)
            times.append((time.process_time() - started) / calls)
        print(f"observe_request: {min(times) * 1e6:.2f} us of CPU a call (best of 5 x {calls:,})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests counted")
    parser.add_argument("--warm", type=int, default=100, help="requests of the baseline run")
    parser.add_argument("--loads", default=",".join(LOADS), help="loads, comma-separated")
    parser.add_argument("--no-strace", action="store_true")
    parser.add_argument("--no-callgrind", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--observe", action="store_true")
    args = parser.parse_args()
    if args.observe:
        observe_alone()
        return
    for tool, wanted in (("strace", not args.no_strace), ("valgrind", not args.no_callgrind)):
        if wanted and shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (apt-get install {tool})")
    site = Server()
    try:
        site.prepare()
        if args.profile:
            for load in args.loads.split(","):
                profile(site, load, args.warm + args.requests)
            return
        print(f"per request, the difference of {args.warm} and {args.warm + args.requests} "
              "requests through Django's WSGI handler, fsync off")  # fmt: skip
        print(f"{'load':<6} {'figures':<8} {'instructions':>13} {'system calls':>13}")
        for load in args.loads.split(","):
            found: dict[bool, int] = {}
            for metrics in (False, True):
                instr = calls = "-"
                if not args.no_callgrind:
                    low = instructions(site, load, args.warm, metrics)
                    high = instructions(site, load, args.warm + args.requests, metrics)
                    found[metrics] = (high - low) // args.requests
                    instr = f"{found[metrics]:,}"
                if not args.no_strace:
                    low = syscalls(site, load, args.warm, metrics)
                    high = syscalls(site, load, args.warm + args.requests, metrics)
                    calls = f"{(high - low) / args.requests:.1f}"
                print(f"{load:<6} {'on' if metrics else 'off':<8} {instr:>13} {calls:>13}",
                      flush=True)  # fmt: skip
            if len(found) == 2:
                print(f"{load:<6} on/off   {found[True] / found[False]:>13.3f}")
    finally:
        site.stop()


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        _, _, load, count, token, tmp, on = sys.argv
        workload(load, int(count), token, str(Path(tmp) / "var"), on == "1")
    else:
        main()
