"""Instructions a queue request costs through the whole middleware chain and through the API's
(taskhoster_site/lanes.py), counted by callgrind rather than timed: the same bearer-token
request (a claim on an empty queue, which answers 204 and touches the store the least, and a
queue's stats) sent N times to each of Django's two handlers in a fresh process.

    .venv/bin/python bench/lanes_counts.py [--requests 200] [--warm 50]

Each count is the difference of a run of `warm` requests and one of `warm + requests`, divided
by `requests`: the start, the imports and the first requests cancel out. Counts need no quiet
machine. valgrind must be installed (apt-get install valgrind).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from http_bench_server import HOST, IDLE_QUEUE, Server  # noqa: E402

REQUESTS = {  # name: (method, path tail of the queue, body)
    "claim, empty queue (204)": ("POST", "claim", {"worker": "w"}),
    "stats (200)": ("GET", "stats", None),
}


def child(which: str, name: str, count: int, token: str) -> None:
    """Send `count` requests through the `which` handler (the measured process)."""
    import django

    django.setup(set_prefix=False)
    from django.core.handlers.wsgi import WSGIHandler

    from taskhoster_site import lanes

    handler = lanes.ApiHandler() if which == "api" else WSGIHandler()
    method, tail, body = REQUESTS[name]
    data = b"" if body is None else json.dumps(body).encode()
    env: dict[str, Any] = {
        "REQUEST_METHOD": method, "PATH_INFO": f"/api/v1/queues/{HOST}/{IDLE_QUEUE}/{tail}",
        "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "127.0.0.1", "REMOTE_ADDR": "127.0.0.1",
        "HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_ACCEPT": "application/json",
        "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
    }  # fmt: skip
    if body is not None:
        env |= {"CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(data))}

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        if status[:1] not in "2":
            raise SystemExit(f"{name}: {status}")

    for _ in range(count):
        answer = handler({**env, "wsgi.input": io.BytesIO(data)}, start_response)
        b"".join(answer)
        answer.close()


def instructions(server: Server, which: str, name: str, count: int) -> int:
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
            __file__, "--child", which, name, str(count)]  # fmt: skip
    env = {**server.env(), "PYTHONHASHSEED": "0", "BENCH_TOKEN": server.tokens["worker"]}
    run = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"{which} {name} failed:\n{run.stderr[-3000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warm", type=int, default=50)
    args = parser.parse_args()
    server = Server(fsync=False)
    try:
        server.prepare()
        print(f"instructions per request, the difference of {args.warm} and "
              f"{args.warm + args.requests} requests")  # fmt: skip
        print(f"{'request':<26} {'whole chain':>12} {'API chain':>12} {'ratio':>6}")
        for name in REQUESTS:
            per = {}
            for which in ("site", "api"):
                low = instructions(server, which, name, args.warm)
                high = instructions(server, which, name, args.warm + args.requests)
                per[which] = (high - low) / args.requests
            print(f"{name:<26} {per['site']:>12,.0f} {per['api']:>12,.0f} "
                  f"{per['api'] / per['site']:>6.2f}", flush=True)  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), os.environ["BENCH_TOKEN"])
    else:
        main()
