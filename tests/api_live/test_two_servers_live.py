"""Two web servers, one PostgreSQL database: two gunicorns on their own ports and their own
local directories serve one queue whose store is PostgreSQL. Tasks are posted through one,
claimed through both by many workers; one server is SIGKILLed in the middle (with the claims
its workers held), and every task must end finished exactly once, with no result of a lapsed
lease accepted."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import environ
import psycopg
import pytest
from psycopg import sql

from taskhoster.client import ApiError, Client

from .live import ROOT, free_port

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
HOST, QUEUE = "two.example.com", "shared"
TASKS, WORKERS, LEASE = 120, 8, 2  # LEASE: seconds, so the held claims lapse soon


def _server_url() -> str | None:
    """A PostgreSQL server to make this test's database on: the suite's PostgreSQL run's, or
    TASKHOSTER_PG_STORE_URL's; None: skip."""
    for name in ("DATABASE_URL", "TASKHOSTER_PG_STORE_URL"):
        url = os.environ.get(name, "")
        if url.startswith(("postgres://", "postgresql://")):
            return url
    return None


@pytest.fixture
def database() -> str:
    """A database of its own (the servers commit for real), dropped afterwards."""
    url = _server_url()
    if url is None:
        pytest.skip("two web servers share a PostgreSQL database: run in the PostgreSQL run "
                    "(make test-postgres) or with TASKHOSTER_PG_STORE_URL set")  # fmt: skip
    config = environ.Env.db_url_config(url)
    name = f"th_two_{secrets.token_hex(4)}"
    admin = {"host": config["HOST"] or None, "port": config["PORT"] or None,
             "user": config["USER"] or None, "password": config["PASSWORD"] or None}  # fmt: skip
    with psycopg.connect(dbname=config["NAME"], autocommit=True, **admin) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    user = f"{config['USER']}@" if config["USER"] else ""
    yield f"postgres://{user}{config['HOST'] or '127.0.0.1'}:{config['PORT'] or 5432}/{name}"
    with psycopg.connect(dbname=config["NAME"], autocommit=True, **admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))  # fmt: skip


class Server:
    """One web server: gunicorn with gunicorn.conf.py, its own directories, in a session of
    its own so that SIGKILL to the group takes the master and its workers at once."""

    def __init__(self, tmp: Path, name: str, database: str) -> None:
        self.dir, self.port = tmp / name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.database = database
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        return {**os.environ, "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
                "DATABASE_URL": self.database, "TASKHOSTER_PG_STORE_URL": "",
                "TASKHOSTER_ITEMS_DIR": str(self.dir / "items"),
                "TASKHOSTER_LOGS_DIR": str(self.dir / "logs"),
                "TASKHOSTER_VAR_DIR": str(self.dir / "var"), "DEBUG": "1",
                "TASKHOSTER_FSYNC": "0"}  # fmt: skip

    def manage(self, *args: str) -> str:
        argv = [sys.executable, str(ROOT / "manage.py"), *args]
        done = subprocess.run(argv, env=self.env(), cwd=ROOT, capture_output=True, text=True,
                              timeout=180, check=True)  # fmt: skip
        return done.stdout

    def start(self) -> None:
        argv = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),
                "--bind", f"127.0.0.1:{self.port}", "--workers", "2", "--threads", "8",
                "--access-logfile", "/dev/null", "taskhoster_site.wsgi:application"]  # fmt: skip
        self.proc = subprocess.Popen(argv, env=self.env(), cwd=ROOT, start_new_session=True)
        for _ in range(300):
            try:
                Client(self.url, timeout=1).request("GET", "/")
                return
            except (OSError, ApiError):
                assert self.proc.poll() is None, "gunicorn exited at start"
                time.sleep(0.1)
        raise RuntimeError("gunicorn did not answer")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def test_two_web_servers_share_a_postgres_queue_and_survive_one_killed(database, tmp_path):
    one, two = Server(tmp_path, "one", database), Server(tmp_path, "two", database)
    one.manage("migrate", "--no-input")
    one.manage("createqueue", HOST, QUEUE, "--store", "postgres", "--lease-seconds", str(LEASE),
               "--max-attempts", "0")  # fmt: skip
    tokens = one.manage("shell", "-c", (
        "from queues.services import get_or_create_user, grant\n"
        "from queues.auth.tokens import issue_token\n"
        f"grant('paul', '{HOST}/{QUEUE}', 'producer')\n"
        f"grant('wendy', '{HOST}/{QUEUE}', 'worker')\n"
        "print(issue_token(get_or_create_user('paul'), 't')[1],"
        " issue_token(get_or_create_user('wendy'), 't')[1])\n")).split()  # fmt: skip
    producer, worker_token = tokens[-2], tokens[-1]
    sweep = None
    try:
        one.start()
        two.start()
        poster = Client(one.url, producer, timeout=30)
        posted = []
        for first in range(0, TASKS, 60):  # a batch holds at most 100
            batch = [{"item": {"n": n}} for n in range(first, first + 60)]
            posted += [task["id"] for task in poster.post_many(HOST, QUEUE, batch)]
        # the sweep hands the lapsed leases of the killed server's workers on
        sweep = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "sweep", "--loop",
                                  "--interval", "0.5"], env=one.env(), cwd=ROOT,
                                 stdout=subprocess.DEVNULL)  # fmt: skip
        accepted: dict[str, list[tuple[str, int]]] = defaultdict(list)
        stale: list[tuple[str, str, int]] = []  # claims dropped when their server died
        uncertain: list[tuple[str, str, int]] = []  # results whose answer died with it
        lock, done, two_dead = threading.Lock(), threading.Event(), threading.Event()

        def work(n: int) -> None:
            name = f"w{n}"
            servers = [Client(one.url, worker_token, timeout=30),
                       Client(two.url, worker_token, timeout=30)]  # fmt: skip
            turn = n
            while not done.is_set():
                turn += 1
                client = servers[turn % 2]
                if client is servers[1] and two_dead.is_set():
                    client = servers[0]
                try:
                    task = client.claim(HOST, QUEUE, name, wait=1)
                except OSError:
                    continue  # server two is gone: the next turn asks server one
                if task is None:
                    continue
                time.sleep(0.01)  # the work
                if client is servers[1] and two_dead.is_set():
                    with lock:  # its server died holding the claim: a worker would give up
                        stale.append((task["id"], name, task["attempts"]))
                    continue
                try:
                    client.result(HOST, QUEUE, task["id"], name, task["attempts"], {"by": name})
                except OSError:  # the server died with the result: taken or not, unknown
                    with lock:
                        uncertain.append((task["id"], name, task["attempts"]))
                    continue
                except ApiError as exc:
                    assert exc.code == "lease_lost", exc
                    continue
                with lock:
                    accepted[task["id"]].append((name, task["attempts"]))

        held = Client(two.url, worker_token, timeout=30).claim(HOST, QUEUE, "holder", max=3)
        assert held, "server two gave the holder no task"
        threads = [threading.Thread(target=work, args=(n,)) for n in range(WORKERS)]
        for thread in threads:
            thread.start()
        while len(accepted) < TASKS // 3:  # a third done through both servers
            time.sleep(0.05)
        two_dead.set()
        two.kill()  # with the holder's claims in flight: their leases lapse, the sweep requeues
        stale += [(task["id"], "holder", task["attempts"]) for task in held]
        operator = Client(one.url, producer, timeout=30)
        for _ in range(1200):  # every task finished, or the bound fails the test below
            if len(set(accepted) | {tid for tid, _, _ in uncertain}) >= TASKS:
                break
            time.sleep(0.1)
        done.set()
        for thread in threads:
            thread.join(60)

        finals = {tid: operator.get(HOST, QUEUE, tid) for tid in posted}
        for tid, name, attempt in uncertain:  # taken when the task kept that attempt's result
            if finals[tid]["result"] == {"by": name} and finals[tid]["attempts"] == attempt:
                accepted[tid].append((name, attempt))
            else:
                stale.append((tid, name, attempt))
        assert sorted(accepted) == sorted(posted)
        assert all(len(results) == 1 for results in accepted.values()), accepted
        assert {final["status"] for final in finals.values()} == {"finished"}
        # the result kept is the one accepted, from the attempt that held the lease
        for tid, [(name, attempt)] in accepted.items():
            assert finals[tid]["result"] == {"by": name} and finals[tid]["attempts"] == attempt
        # a result of a lapsed lease (the holder's, and any other worker's whose server died
        # under it), sent late through the surviving server, is refused
        late = Client(one.url, worker_token, timeout=30)
        for tid, name, attempt in stale:
            with pytest.raises(ApiError) as refused:
                late.result(HOST, QUEUE, tid, name, attempt, {"by": "late"})
            assert refused.value.code == "lease_lost"
            assert operator.get(HOST, QUEUE, tid)["result"] != {"by": "late"}
    finally:
        if sweep is not None:
            sweep.terminate()
            sweep.wait(30)
        one.kill()
        two.kill()
