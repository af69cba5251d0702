"""A private PostgreSQL cluster for one chaos run: its own data dir, port and sockets.

The run crashes and restarts it, so it must never be the machine's own cluster. `initdb` and
`postgres` refuse to run as root, so they run as the `postgres` OS user through `setpriv`,
which execs (no fork, unlike runuser): the child we start IS the postmaster, and its pid is
the one to kill. fsync stays on: a commit the run saw acknowledged must survive a crash.

A crash is the postmaster and every backend it forked SIGKILLed together. The backends lead
process groups of their own (postgres calls setsid in each child), so a killpg of the
postmaster's group would leave them running; the postmaster is stopped first so it forks no
new one while its children are listed, then all of them are killed. A restart waits until
every killed process is gone: postgres refuses a data dir whose shared memory is still in use.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

from .server import free_port

OS_USER = "postgres"
BINARIES = ("initdb", "postgres")
DATABASE = "taskhoster"


def missing() -> str | None:
    """Why this machine cannot run a private cluster, in one line; None when it can."""
    absent = [name for name in (*BINARIES, "setpriv") if shutil.which(name) is None]
    if absent:
        return f"--store postgres needs {', '.join(absent)} on PATH (PostgreSQL's server binaries)"
    try:
        pwd.getpwnam(OS_USER)
    except KeyError:
        return f"--store postgres needs the {OS_USER!r} OS user to run PostgreSQL as"
    return None


class PgCluster:
    def __init__(self, base: Path | None = None, *, log: Path | None = None) -> None:
        # its own temp dir, not inside the run's (root's 0700 dirs are closed to `postgres`)
        self.base = base or Path(tempfile.mkdtemp(prefix="chaos-pg-"))
        self.data, self.sockets = self.base / "data", self.base
        self.log = log or self.base / "postgres.log"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def _as_postgres(self) -> list[str]:
        if os.geteuid() != 0:
            return []  # already an unprivileged user: run the binaries as ourselves
        return ["setpriv", f"--reuid={OS_USER}", f"--regid={OS_USER}", "--init-groups", "--"]

    def init(self) -> None:
        """initdb (trust auth for loopback: a throwaway cluster), start, make the database."""
        if os.geteuid() == 0:
            user = pwd.getpwnam(OS_USER)
            os.chown(self.base, user.pw_uid, user.pw_gid)
        argv = [*self._as_postgres(), "initdb", "-D", str(self.data), "-U", "postgres"]
        argv += ["--auth=trust", "--encoding=UTF8", "--locale=C"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603 (argv is ours)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr[-2000:]}")
        self.start()
        with psycopg.connect(self.dsn.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))

    def start(self, timeout: float = 60) -> None:
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.sockets),
            "fsync": "on",
            "synchronous_commit": "on",
            "full_page_writes": "on",
            # two web workers' pools and threads, the sweep, producers and the checker
            "max_connections": "200",
            "shared_buffers": "32MB",
        }
        argv = [*self._as_postgres(), "postgres", "-D", str(self.data)]
        for name, value in settings.items():
            argv += ["-c", f"{name}={value}"]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(  # noqa: S603 (argv is ours)
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        """Until a connection gets in (crash recovery done), or RuntimeError."""
        deadline = time.monotonic() + timeout
        admin = self.dsn.rsplit("/", 1)[0] + "/postgres"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}; see {self.log}")
            try:
                with psycopg.connect(admin, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"postgres did not accept connections within {timeout:.0f} s")

    def _family(self) -> list[int]:
        """The postmaster's pid and its children's (the backends, checkpointer, WAL writer...)."""
        if self.proc is None:
            return []
        pid = self.proc.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        return [pid, *(int(c) for c in children)]

    def crash(self) -> None:
        """SIGKILL the postmaster and all its children at once: a crash, no shutdown."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGSTOP)  # no new child while they are listed
        family = self._family()
        for pid in reversed(family):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        _wait_gone(family[1:])
        self.proc = None

    def stop_fast(self) -> None:
        """pg_ctl's `-m fast`: SIGINT, the postmaster ends every session and checkpoints."""
        if self.proc is None:
            return
        family = self._family()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.crash()
            return
        _wait_gone(family[1:])
        self.proc = None

    def restart(self, *, crash: bool, pause: float) -> None:
        """Crash (or stop fast), stay down `pause` seconds, start on the same dir and port."""
        self.crash() if crash else self.stop_fast()
        time.sleep(pause)
        self.start()
        self.restarts += 1

    def destroy(self, *, keep: bool = False) -> None:
        """Kill the cluster; remove its files unless `keep` (a failed run's evidence)."""
        self.crash()
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)


def _wait_gone(pids: list[int], timeout: float = 30) -> None:
    """Until none of `pids` is a live process (zombies count as gone: their memory is freed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive:
            return
        time.sleep(0.05)
    raise RuntimeError(f"postgres processes {alive} outlived their SIGKILL")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
