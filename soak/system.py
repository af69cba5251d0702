"""The system under test as deployed: `manage.py serve` (gunicorn, the sweep loop, the log
ingester) on the soak's temp database and its two tmpfs mounts, and a watcher that notes every
process of that tree that starts or ends.

Preparation reuses the chaos run's Server (migrate, the queue, grants, tokens; its env and its
one-process sweeps), adding a schedule and a failure webhook; only `start` differs: the real
supervisor, not a gunicorn of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from chaos.server import HOST, QUEUE, ROOT, Server, kill_group

# what a child of serve is, from a word of its command line
KINDS = {"gunicorn": "web", "sweep": "sweep", "ingest_tasklogs": "ingest"}


def kind_of(cmdline: list[str]) -> str:
    """By whole words: a child seen between its fork and its exec still has serve's command
    line, whose `--sweep-interval` must not make it a sweep."""
    for word in cmdline:
        if word in KINDS:
            return KINDS[word]
    return "other"


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


class SoakServer(Server):
    """The chaos run's Server, started through `manage.py serve` with a schedule and a webhook."""

    def __init__(self, run_dir: Path, *, lease: int, sweep_interval: float, hook_url: str) -> None:
        super().__init__(run_dir, lease=lease, web_workers=2, threads=16)
        self.sweep_interval, self.hook_url = sweep_interval, hook_url
        self.serve: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        return {
            **super().env(),
            "TASKHOSTER_WEB_WORKERS": str(self.web_workers),
            "TASKHOSTER_WEB_THREADS": str(self.threads),
            "TASKHOSTER_WEBHOOK_ALLOW_PRIVATE": "1",  # the slow receiver is on loopback
            "PYTHONUNBUFFERED": "1",
            "TASKHOSTER_SSE_KEEPALIVE_SECONDS": "5",  # the readers' sockets time out at 10 s
            # flushes on, as deployed: the logs disk's error (faults.ro_logs) loses what its
            # file system had not written, as a power cut would (the items tmpfs's are free)
            "TASKHOSTER_FSYNC": "1",
        }

    def prepare(self) -> None:
        super().prepare()
        script = (
            "import datetime as dt\n"
            "from queues.services import find_queue\n"
            "from schedules.services import save_schedule\n"
            "from webhooks.models import Webhook\n"
            f"save_schedule({HOST!r}, {QUEUE!r}, 'every-minute', cron='* * * * *',\n"
            "    timezone='UTC', item={'from': 'schedule'}, now=dt.datetime.now(dt.UTC))\n"
            f"Webhook.objects.create(queue=find_queue({HOST + '/' + QUEUE!r}),\n"
            f"    url={self.hook_url!r}, notify_failed=True)\n"
        )
        self.manage("shell", "-c", script)

    def stop_schedule(self) -> None:
        """Disable the schedule before the drain: a run that fired after the claimers stopped
        would leave its task pending, owed to nobody (the posters stop at the drain too)."""
        script = "from schedules.models import Schedule\nSchedule.objects.update(enabled=False)\n"
        self.manage("shell", "-c", script)

    def start(self) -> None:
        argv = [
            sys.executable,
            str(ROOT / "manage.py"),
            "serve",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--sweep-interval",
            str(self.sweep_interval),
        ]
        with (
            open(self.run_dir / "serve.out", "ab") as out,
            open(self.run_dir / "serve.err", "ab") as err,
        ):
            self.serve = subprocess.Popen(  # noqa: S603 (argv is ours)
                argv, env=self.env(), cwd=ROOT, stdout=out, stderr=err, start_new_session=True
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.serve.poll() is not None:
                raise RuntimeError(f"serve exited at start (rc {self.serve.returncode})")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                if len(self.web_pids()) >= self.web_workers:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("serve's web server did not answer within 90 s")

    @property
    def gunicorn_pid(self) -> int | None:
        if self.serve is None:
            return None
        for pid in children(self.serve.pid):
            if kind_of(cmdline(pid)) == "web":
                return pid
        return None

    def web_pids(self) -> list[int]:
        master = self.gunicorn_pid
        return children(master) if master is not None else []

    def child_pid(self, kind: str) -> int | None:
        if self.serve is None:
            return None
        for pid in children(self.serve.pid):
            if kind_of(cmdline(pid)) == kind:
                return pid
        return None

    def stop_serve(self, grace: float = 30) -> int | None:
        """SIGTERM, as an operator stops it; its exit code (None: it had to be killed)."""
        if self.serve is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            self.serve.send_signal(signal.SIGTERM)
        try:
            return self.serve.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            kill_group(self.serve)
            return None

    def stop(self) -> None:
        super().stop()
        kill_group(self.serve)


class Watcher:
    """Every `interval` s, the tree under serve (its children and gunicorn's workers); a pid
    that is gone is a death, `caused` when the soak said it would kill it (`expect_death`)."""

    def __init__(self, server: SoakServer, log_path: Path, interval: float = 0.25) -> None:
        self.server, self.interval = server, interval
        self.log = open(log_path, "a", buffering=1)  # noqa: SIM115 (open for the whole run)
        self.known: dict[int, str] = {}
        self.expected: set[int] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="watcher", daemon=True)

    def note(self, **line: object) -> None:
        with self.lock:
            self.log.write(json.dumps({"t": time.time(), **line}) + "\n")

    def expect_death(self, pid: int) -> None:
        with self.lock:
            self.expected.add(pid)

    def start(self) -> None:
        self.scan()
        self.thread.start()

    def scan(self) -> None:
        serve = self.server.serve
        if serve is None:
            return
        now: dict[int, str] = {}
        if serve.poll() is None:
            now[serve.pid] = "serve"
        for pid in children(serve.pid):
            kind = kind_of(cmdline(pid))
            now[pid] = kind
            if kind == "web":
                for worker in children(pid):
                    now[worker] = "web-worker"
        for pid, kind in now.items():
            if pid not in self.known or self.known[pid] == "other" != kind:
                # "other": seen between its fork and its exec, still with serve's command line
                self.note(e="started", pid=pid, kind=kind)
        for pid, kind in self.known.items():
            if pid not in now:
                with self.lock:
                    caused = pid in self.expected
                self.note(e="died", pid=pid, kind=kind, caused=caused)
        self.known = now

    def _loop(self) -> None:
        while not self.stopping.wait(self.interval):
            self.scan()

    def stop(self) -> None:
        """Stop watching before serve is stopped on purpose: its children's end is no death."""
        self.stopping.set()
        self.thread.join(timeout=5)
        self.scan()
        self.note(e="watch_end")


def wait_for(predicate: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return True
        time.sleep(0.2)
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
