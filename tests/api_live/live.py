"""A real gunicorn for the live tests: temp database and directories, queues, users, tokens."""

from __future__ import annotations

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
THREADS = 6  # few, so that a stream that kept its thread after its client left would show


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
        }

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(ROOT / "manage.py"), *args]
        return subprocess.run(argv, env=self.env(), check=check, capture_output=True, text=True,
                              cwd=ROOT, timeout=120)  # fmt: skip

    def prepare(self) -> None:
        (self.tmp / "static").mkdir(exist_ok=True)
        self.manage("migrate", "--no-input")
        self.manage("createqueue", HOST, QUEUE, "--lease-seconds", "60")
        self.manage("createqueue", HOST, SHORT, "--lease-seconds", "1", "--max-attempts", "8")
        for queue in (QUEUE, SHORT):
            for user, role in (("olga", "operator"), ("paul", "producer"), ("wendy", "worker")):
                self.manage("grant", user, f"{HOST}/{queue}", role)
        for user in ("olga", "paul", "wendy"):
            self.tokens[user] = self.manage("createtoken", user).stdout.strip()

    def start(self) -> None:
        argv = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),
                "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", str(THREADS),
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
                "from queues.services import get_store, queue_settings_for\n"
                "from queues.store import sweep_all\n"
                "print(sweep_all(get_store(), queue_settings_for))\n"
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
