"""The system under test: gunicorn and `manage.py sweep --loop` on a temp database and dirs.

With `pg_dsn` the console's database is the run's private PostgreSQL cluster
(chaos/pgcluster.py) and the chaos queue's store is PostgreSQL, so its tasks and its event
rows (Task Logs' table: the store shares the console's database) live there.

Every process is started in a session of its own, so that one `killpg` ends it with all its
children (gunicorn's workers die with their master), whatever happens to the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
HOST, QUEUE = "chaos.example.com", "work"
# The fields of `manage.py sweep`'s report that mean the sweep changed something.
CHANGES = (
    "timeout",
    "requeue",
    "failed",
    "cleaned",
    "reconciled",
    "quarantined",
    "temp_removed",
    "keys_removed",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kill_group(proc: subprocess.Popen[Any] | None, sig: int = signal.SIGKILL) -> None:
    """Signal a child's whole process group (it leads its own session), ignoring the gone."""
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
    if sig == signal.SIGKILL:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)  # reap it, so that no zombie outlives the run


# The store's events table when the console's database is the store's (queues/stores/pg_location.py)
PG_EVENTS_TABLE = "tasklogs_taskevent"
# the states the run watches, from the store's status column
_COUNTS = (
    "SELECT CASE WHEN status IN ('pending', 'processing') THEN status ELSE 'done' END, count(*)"
    " FROM th_tasks WHERE host = %s AND queue = %s GROUP BY 1"
)


class Server:
    def __init__(
        self,
        run_dir: Path,
        *,
        lease: int,
        web_workers: int,
        threads: int,
        pg_dsn: str | None = None,
    ) -> None:
        self.run_dir, self.lease = run_dir, lease
        # None: the file store on a temp SQLite console; else the PostgreSQL store on it
        self.pg_dsn = pg_dsn
        self._last_counts = {"pending": 0, "processing": 0, "done": 0}
        self._counts_conn: psycopg.Connection[Any] | None = None
        self.web_workers, self.threads = web_workers, threads
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.items, self.logs = run_dir / "items", run_dir / "logs"
        self.tokens: dict[str, str] = {}
        self.gunicorn: subprocess.Popen[bytes] | None = None
        self.sweeper: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
            "DATABASE_URL": self.pg_dsn or f"sqlite:///{self.run_dir / 'db.sqlite3'}",
            "TASKHOSTER_ITEMS_DIR": str(self.items),
            "TASKHOSTER_LOGS_DIR": str(self.logs),
            "TASKHOSTER_VAR_DIR": str(self.run_dir / "var"),
            "STATIC_ROOT": str(self.run_dir / "static"),
            "DEBUG": "0",
            "SECRET_KEY": "chaos-run-not-secret-" + "x" * 40,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "TASKHOSTER_HTTPS": "0",  # plain HTTP on loopback: no redirect to https
            # Process kills, not power loss: the page cache survives SIGKILL, so fsync adds
            # nothing to what this run can find and would halve its throughput on 2 cores.
            "TASKHOSTER_FSYNC": os.environ.get("CHAOS_FSYNC", "0"),
        }

    def manage(self, *args: str, timeout: float = 120) -> str:
        argv = [sys.executable, str(ROOT / "manage.py"), *args]
        done = subprocess.run(  # noqa: S603 (argv is ours)
            argv,
            env=self.env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed: {done.stderr[-2000:]}")
        return done.stdout

    def prepare(self) -> None:
        """Migrate, then the queue, the grants and three tokens, in one Django start-up."""
        (self.run_dir / "static").mkdir(parents=True, exist_ok=True)
        self.manage("migrate", "--no-input")
        script = (
            "import json\n"
            "from queues.services import get_or_create_user, grant, save_queue\n"
            "from queues.auth.tokens import issue_token\n"
            f"save_queue({HOST!r}, {QUEUE!r}, lease_seconds={self.lease}, max_attempts=0,\n"
            f"           store={'postgres' if self.pg_dsn else 'files'!r})\n"
            "for user, role in (('olga', 'operator'), ('paul', 'producer'), ('wendy', 'worker')):\n"
            f"    grant(user, {HOST + '/' + QUEUE!r}, role)\n"
            "print(json.dumps({u: issue_token(get_or_create_user(u), 'chaos')[1]\n"
            "                  for u in ('olga', 'paul', 'wendy')}))\n"
        )
        self.tokens = json.loads(self.manage("shell", "-c", script).strip().splitlines()[-1])

    def start(self) -> None:
        argv = [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            str(ROOT / "gunicorn.conf.py"),
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(self.web_workers),
            "--threads",
            str(self.threads),
            "--access-logfile",
            "/dev/null",
            "--error-logfile",
            str(self.run_dir / "gunicorn.log"),
            "taskhoster_site.wsgi:application",
        ]
        # Django's request log (a 400 for a body cut short by a killed worker) goes to the
        # run's directory, not the report.
        with open(self.run_dir / "gunicorn.log", "ab") as out:
            self.gunicorn = subprocess.Popen(  # noqa: S603 (argv is ours)
                argv,
                env=self.env(),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                if len(self.web_pids()) >= self.web_workers:
                    return
            except OSError:
                pass
            if self.gunicorn.poll() is not None:
                raise RuntimeError("gunicorn exited at start")
            time.sleep(0.1)
        raise RuntimeError("gunicorn did not start within 60 s")

    def web_pids(self) -> list[int]:
        """gunicorn's worker processes: the master's children (the nemesis never kills it)."""
        if self.gunicorn is None:
            return []
        try:
            text = Path(f"/proc/{self.gunicorn.pid}/task/{self.gunicorn.pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def start_sweeper(self, interval: float) -> None:
        argv = [
            sys.executable,
            str(ROOT / "manage.py"),
            "sweep",
            "--loop",
            "--interval",
            str(interval),
        ]
        with open(self.run_dir / "sweeper.log", "ab") as out:
            self.sweeper = subprocess.Popen(  # noqa: S603 (argv is ours)
                argv,
                env=self.env(),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def sweep_to_fixpoint(self, max_sweeps: int = 30) -> list[dict[str, Any]]:
        """Sweep in one process until two sweeps in a row change nothing (or `max_sweeps`)."""
        if self.pg_dsn:
            return self._sweep_pg_to_fixpoint(max_sweeps)
        script = (
            "import json\n"
            "from queues.services import queue_settings_for\n"
            "from queues.store import QueueStore, StoreConfig, sweep_all\n"
            "from django.conf import settings as s\n"
            "from pathlib import Path\n"
            "store = QueueStore(StoreConfig(items_dir=Path(s.TASKHOSTER_ITEMS_DIR),\n"
            "    logs_dir=Path(s.TASKHOSTER_LOGS_DIR), fsync=s.TASKHOSTER_FSYNC,\n"
            "    log_retain_days=s.TASKHOSTER_LOG_RETAIN_DAYS))\n"
            f"quiet = 0\nfor _ in range({max_sweeps}):\n"
            "    r = sweep_all(store, queue_settings_for)\n"
            "    print(json.dumps({'skipped': r.skipped, 'errors': r.errors, **r.counts()}))\n"
            f"    changed = r.skipped or any(r.counts()[k] for k in {CHANGES!r})\n"
            "    quiet = 0 if changed else quiet + 1\n"
            "    if quiet >= 2:\n"
            "        break\n"
        )
        out = self.manage("shell", "-c", script, timeout=300)
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    def _sweep_pg_to_fixpoint(self, max_sweeps: int) -> list[dict[str, Any]]:
        """The same, through the site's store (the router sweeps the PostgreSQL queue)."""
        script = (
            "import json\n"
            "from queues import stores\n"
            "from queues.services import queue_settings_for\n"
            f"quiet = 0\nfor _ in range({max_sweeps}):\n"
            "    r = stores.router().sweep_all(queue_settings_for)\n"
            "    print(json.dumps({'skipped': r.skipped, 'errors': r.errors, **r.counts()}))\n"
            f"    changed = r.skipped or r.errors or any(r.counts()[k] for k in {CHANGES!r})\n"
            "    quiet = 0 if changed else quiet + 1\n"
            "    if quiet >= 2:\n"
            "        break\n"
        )
        out = self.manage("shell", "-c", script, timeout=300)
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    def counts(self) -> dict[str, int]:
        """Tasks pending, processing and ended, read straight from the store."""
        if self.pg_dsn:
            return self._pg_counts()
        base = self.items / HOST / QUEUE
        out = {}
        for d in ("pending", "processing", "done"):
            try:
                out[d] = sum(1 for e in os.scandir(base / d) if e.name.endswith(".json"))
            except FileNotFoundError:
                out[d] = 0
        return out

    def _pg_counts(self) -> dict[str, int]:
        """From the status column; while the database is down, the last counts it gave."""
        try:
            if self._counts_conn is None or self._counts_conn.closed:
                self._counts_conn = psycopg.connect(
                    self.pg_dsn or "", autocommit=True, connect_timeout=2
                )
            found = dict(self._counts_conn.execute(_COUNTS, (HOST, QUEUE)).fetchall())
        except psycopg.Error:
            if self._counts_conn is not None:
                self._counts_conn.close()
            self._counts_conn = None
            return dict(self._last_counts)
        self._last_counts = {d: int(found.get(d, 0)) for d in ("pending", "processing", "done")}
        return dict(self._last_counts)

    def stop(self) -> None:
        if self._counts_conn is not None:
            self._counts_conn.close()
        for proc in (self.sweeper, self.gunicorn):
            kill_group(proc)
