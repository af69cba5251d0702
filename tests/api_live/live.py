"""A real gunicorn for the live tests: temp database and directories, queues, users, tokens."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
HOST = "live.example.com"
QUEUE, SHORT = "work", "short"  # SHORT: a 1 s lease, for the sweep's requeue
# Each test that claims "the next task" has a queue of its own, so no other test's leftover
# is what it claims; the value is the queue's lease in seconds.
QUEUES = {QUEUE: 60, SHORT: 1, "wake": 60, "result": 60, "fail": 60, "retry": 60,
          "beat": 1, "stale": 1, "flaky": 60, "nobudget": 60, "paused": 60, "pool": 60,
          "poolstop": 60, "cli": 60, "cliwork": 60, "clifail": 60, "clikill": 60,
          "clicancel": 3, "clistop": 60, "cliabandon": 2, "cliwatch": 60,
          "cliwait": 60, "djdefault": 60, "djflaky": 60, "djfail": 60, "djprio": 60,
          "djlater": 60, "djodd": 60, "batch": 60, "batchpool": 60, "chunked": 60,
          "metrics": 60, "chain": 60, "chainbudget": 60, "chainpool": 60}  # fmt: skip
# Settings beyond the lease (every queue has a budget of 8 unless it says otherwise here).
SETTINGS = {"flaky": {"max_attempts": 3, "backoff_seconds": 0},
            "batchpool": {"max_attempts": 3, "backoff_seconds": 0, "max_item_bytes": 2000},
            "nobudget": {"max_attempts": 0}, "paused": {"paused": True},
            "clifail": {"max_attempts": 2, "backoff_seconds": 0},
            "clikill": {"max_attempts": 1},
            "djflaky": {"max_attempts": 3, "backoff_seconds": 0},
            "djfail": {"max_attempts": 2, "backoff_seconds": 0}}  # fmt: skip
THREADS = 6  # few, so that a stream that kept its thread after its client left would show
MAX_STREAMS = 3  # of them, at most this many hold event streams
METRICS_TOKEN = "live-metrics-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    def __init__(self, tmp: Path) -> None:
        self.tmp, self.port = tmp, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.items, self.logs = tmp / "items", tmp / "logs"
        self.tokens: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.workers = 1
        self.extra_env: dict[str, str] = {}  # over env()'s, for a server of one test module

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
            "DATABASE_URL": f"sqlite:///{self.tmp / 'db.sqlite3'}",
            "TASKHOSTER_ITEMS_DIR": str(self.items),
            "TASKHOSTER_LOGS_DIR": str(self.logs),
            "TASKHOSTER_VAR_DIR": str(self.tmp / "var"),
            "STATIC_ROOT": str(self.tmp / "static"),
            "DEBUG": "1",
            "TASKHOSTER_FSYNC": "0",
            "TASKHOSTER_SSE_KEEPALIVE_SECONDS": "0.5",
            "TASKHOSTER_MAX_STREAMS": str(MAX_STREAMS),
            "TASKHOSTER_METRICS_TOKEN": METRICS_TOKEN,
            "TASKHOSTER_METRICS_DIR": str(self.tmp / "metrics"),  # not one in /dev/shm per run
            **self.extra_env,
        }

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(ROOT / "manage.py"), *args]
        return subprocess.run(argv, env=self.env(), check=check, capture_output=True, text=True,
                              cwd=ROOT, timeout=120)  # fmt: skip

    def prepare(self) -> None:
        """Migrate, then every queue, grant and token in one process (one start-up, not 30)."""
        (self.tmp / "static").mkdir(exist_ok=True)
        self.manage("migrate", "--no-input")
        script = (
            "import json\n"
            "from queues.services import get_or_create_user, grant, save_queue\n"
            "from queues.auth.tokens import issue_token\n"
            f"for name, lease in {QUEUES!r}.items():\n"
            f"    fields = {{'lease_seconds': lease, 'max_attempts': 8}}\n"
            f"    fields.update({SETTINGS!r}.get(name, {{}}))\n"
            f"    save_queue({HOST!r}, name, **fields)\n"
            "    for user, role in (('olga', 'operator'), ('paul', 'producer'),\n"
            "                       ('wendy', 'worker')):\n"
            f"        grant(user, {HOST!r} + '/' + name, role)\n"
            "print(json.dumps({u: issue_token(get_or_create_user(u), 't')[1]\n"
            "                  for u in ('olga', 'paul', 'wendy')}))\n"
        )
        self.tokens = json.loads(self.manage("shell", "-c", script).stdout.strip().splitlines()[-1])

    def start(self) -> None:
        argv = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),
                "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers),
                "--threads", str(THREADS),
                "--worker-class", "gthread", "--access-logfile", "/dev/null",
                "taskhoster_site.wsgi:application"]  # fmt: skip
        self.proc = subprocess.Popen(argv, env=self.env(), cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("gunicorn exited at start") from None
                time.sleep(0.1)
        raise RuntimeError("gunicorn did not start within 30 s")

    def sweep(self) -> None:
        """One sweep in another process: `manage.py sweep`, or the store's own when the
        command is not there yet (it is the store engineer's; the test is about the process)."""
        done = self.manage("sweep", check=False)
        if "Unknown command" in done.stderr:
            code = (
                "import django; django.setup()\n"
                "from queues import stores\n"
                "from queues.services import queue_settings_for\n"
                "print(stores.router().sweep_all(queue_settings_for))\n"
            )
            argv = [sys.executable, "-c", code]
            done = subprocess.run(argv, env=self.env(), cwd=ROOT, check=False,
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=25)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
