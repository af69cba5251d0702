"""In-process API benchmark: what each endpoint costs beyond a trivial DRF view, without HTTP.

    .venv/bin/python bench/api_bench.py [--requests 1000] [--fsync 0|1] [--dir /dev/shm]

Django's test client calls the views directly (middleware, authentication, parsing, the store,
rendering), so the figures leave out gunicorn, sockets and the client, and with them most of
the machine's noise: what is left is our code's own share of a lifecycle. Each endpoint's time
is given beside the trivial bearer-authenticated POST of bench/http_bench_urls.py, measured in
the same process before and after.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST, QUEUE = "bench.example.com", "work"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="of each kind")
    parser.add_argument("--fsync", type=int, choices=(0, 1), default=1)
    parser.add_argument("--dir", default=None, help="where the store writes (default: $TMPDIR)")
    return parser.parse_args()


def set_up(tmp: Path, fsync: bool) -> None:
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
    from http_bench_server import site_env

    os.environ.update(site_env(tmp, fsync))
    (tmp / "static").mkdir()
    import django

    django.setup()


def tokens() -> dict[str, str]:
    from django.core.management import call_command

    quiet = io.StringIO()
    call_command("migrate", verbosity=0)
    call_command("createqueue", HOST, QUEUE, "--lease-seconds", "600", stdout=quiet)
    found = {}
    for user in ("producer", "worker"):
        call_command("grant", user, f"{HOST}/{QUEUE}", user, stdout=quiet)
        out = io.StringIO()
        call_command("createtoken", user, stdout=out)
        found[user] = out.getvalue().strip()
    return found


def timed(count: int, call: Callable[[int], object]) -> float:
    """Milliseconds per call."""
    started = time.perf_counter()
    for n in range(count):
        call(n)
    return (time.perf_counter() - started) * 1000 / count


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="th-api-bench-", dir=args.dir) as tmp:
        set_up(Path(tmp), bool(args.fsync))
        from django.test import Client

        keys = tokens()
        client = Client()
        producer = {"HTTP_AUTHORIZATION": f"Bearer {keys['producer']}"}
        worker = {"HTTP_AUTHORIZATION": f"Bearer {keys['worker']}"}
        base = f"/api/v1/queues/{HOST}/{QUEUE}"
        posted: list[str] = []
        claimed: list[dict] = []

        def call(method: str, path: str, body: bytes | None, who: dict, status: int) -> dict:
            if method == "GET":
                response = client.get(path, **who)
            else:
                response = client.post(path, body, content_type="application/json", **who)
            assert response.status_code == status, response.content
            return response.json()

        def noop(_: int) -> None:
            call("POST", "/bench/noop", b'{"a":1}', producer, 200)

        def post(_: int) -> None:
            posted.append(call("POST", f"{base}/tasks", b'{"n":1}', producer, 201)["id"])

        def claim(_: int) -> None:
            claimed.append(call("POST", f"{base}/claim", b'{"worker":"w1"}', worker, 200))

        def result(n: int) -> None:
            task = claimed[n]
            body = b'{"worker":"w1","attempt":%d,"result":{"ok":true}}' % task["attempts"]
            call("POST", f"{base}/tasks/{task['id']}/result", body, worker, 200)

        def read(n: int) -> None:
            call("GET", f"{base}/tasks/{posted[n]}", None, producer, 200)

        count = args.requests
        timed(100, noop)  # warm up: imports, the memo, the first SQL
        before = timed(count, noop)
        rows = [(name, timed(count, fn)) for name, fn in (
            ("post", post), ("claim", claim), ("result", result),
            ("first read (stamps fetchedAt)", read), ("read again", read),
        )]  # fmt: skip
        after = timed(count, noop)
    baseline = (before + after) / 2
    lifecycle = sum(ms for name, ms in rows[:4])
    print(f"$ {' '.join([sys.executable, *sys.argv])}")
    print(f"in-process (Django test client), SQLite, fsync {'on' if args.fsync else 'off'}, "
          f"{count} of each\n")  # fmt: skip
    print(f"{'trivial DRF POST':<32}{baseline:8.3f} ms  (before {before:.3f}, after {after:.3f})")
    for name, ms in rows:
        print(f"{name:<32}{ms:8.3f} ms  = {ms / baseline:.1f} trivial")
    print(f"{'lifecycle (the first four)':<32}{lifecycle:8.3f} ms  = "
          f"{lifecycle / baseline:.1f} trivial requests")  # fmt: skip


if __name__ == "__main__":
    main()
