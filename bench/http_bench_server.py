"""A throw-away taskhoster for the HTTP benchmark: temp DB and dirs, one queue, gunicorn."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST, QUEUE, IDLE_QUEUE = "bench.example.com", "work", "idle"


def configured_threads() -> int:
    """The gthread count gunicorn.conf.py gives the web server (the benchmark's default)."""
    conf = ROOT / "gunicorn.conf.py"
    namespace: dict[str, object] = {"__file__": str(conf)}  # the config finds var/ from it
    exec(compile(conf.read_text(), str(conf), "exec"), namespace)  # our own config file
    return int(str(namespace.get("threads", 1)))


def site_env(tmp: Path, fsync: bool) -> dict[str, str]:
    """The settings of a throw-away site under `tmp` (bench/http_bench_settings.py)."""
    return {
        "DJANGO_SETTINGS_MODULE": "http_bench_settings",
        "PYTHONPATH": f"{ROOT / 'bench'}{os.pathsep}{ROOT}",
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "TASKHOSTER_ITEMS_DIR": str(tmp / "items"),
        "TASKHOSTER_LOGS_DIR": str(tmp / "logs"),
        "TASKHOSTER_VAR_DIR": str(tmp / "var"),
        "TASKHOSTER_FSYNC": "1" if fsync else "0",
        "DEBUG": "0",
        "TASKHOSTER_HTTPS": "0",
        "SECRET_KEY": "bench-only-" + "x" * 50,
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "LOG_LEVEL": "WARNING",
        "STATIC_ROOT": str(tmp / "static"),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    worker_class: str = "gthread"
    workers: int = 2
    threads: int = 8
    fsync: bool = True
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="th-http-bench-")))
    port: int = field(default_factory=free_port)
    tokens: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {**os.environ, **site_env(self.tmp, self.fsync)}

    def manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=self.env(),
                              check=True, capture_output=True, text=True, cwd=ROOT)  # fmt: skip
        return done.stdout.strip()

    def prepare(self) -> None:
        self.manage("migrate", "--no-input")
        for queue in (QUEUE, IDLE_QUEUE):
            self.manage("createqueue", HOST, queue, "--lease-seconds", "60")
            for user, role in (("producer", "producer"), ("worker", "worker")):
                self.manage("grant", user, f"{HOST}/{queue}", role)
        for user in ("producer", "worker"):
            self.tokens[user] = self.manage("createtoken", user)

    def start(self) -> None:
        argv = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),
                "--bind", f"127.0.0.1:{self.port}", "--worker-class", self.worker_class,
                "--workers", str(self.workers), "--threads", str(self.threads),
                "--access-logfile", "/dev/null", "--log-level", "warning",
                "taskhoster_site.wsgi:application"]  # fmt: skip
        self.proc = subprocess.Popen(argv, env=self.env(), cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("gunicorn did not start within 30 s")

    def pids(self) -> list[int]:
        """gunicorn's master and its workers."""
        assert self.proc is not None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [self.proc.pid, *(int(p) for p in children.read_text().split())]

    def cpu_seconds(self) -> float:
        """User and system CPU the master and workers have used so far."""
        ticks = 0
        for pid in self.pids():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        """Resident memory of gunicorn's master and workers together."""
        total_kb = 0
        for pid in self.pids():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        return total_kb / 1024

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=25)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)
