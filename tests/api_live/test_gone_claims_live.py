"""Through a real gunicorn (gthread), on both stores: a claim whose client goes away while it
waits takes no task. The client's socket is closed, or its process killed (SIGKILL, or SIGTERM
with no handler, as a worker restart does), while the claim waits; then a task is posted: it
stays pending, attempts 0, held by nobody, and the next live worker gets it as attempt 1.
(Before, the dead claim took it: processing, attempt 1 of its budget, until its lease lapsed.)
The race, a claim that takes a task as its client leaves, is tests/api/test_gone_clients.py."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import environ
import psycopg
import pytest
from psycopg import sql

from taskhoster.client import Client

from .live import HOST, ROOT, LiveServer

pytestmark = pytest.mark.slow
STORES = ["files", pytest.param("postgres", marks=pytest.mark.postgres)]
QUEUES = {"files": "gone-files", "postgres": "gone-pg"}
# longer than a sleeping claim takes to look at its connection (rules.STILL_WANTED_SECONDS)
SETTLE = 2.5


def _postgres_server() -> str | None:
    """A PostgreSQL server for the store: the suite's PostgreSQL run's, or
    TASKHOSTER_PG_STORE_URL's; None: the postgres case skips."""
    for name in ("DATABASE_URL", "TASKHOSTER_PG_STORE_URL"):
        url = os.environ.get(name, "")
        if url.startswith(("postgres://", "postgresql://")):
            return url
    return None


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str | None]:
    """A database of the module's own for the PostgreSQL store (the server commits for real),
    dropped afterwards; None without a server."""
    url = _postgres_server()
    if url is None:
        yield None
        return
    config = environ.Env.db_url_config(url)
    name = f"th_gone_{secrets.token_hex(4)}"
    admin = {"host": config["HOST"] or None, "port": config["PORT"] or None,
             "user": config["USER"] or None, "password": config["PASSWORD"] or None}  # fmt: skip
    with psycopg.connect(dbname=config["NAME"], autocommit=True, **admin) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    user = f"{config['USER']}@" if config["USER"] else ""
    yield f"postgres://{user}{config['HOST'] or '127.0.0.1'}:{config['PORT'] or 5432}/{name}"
    with psycopg.connect(dbname=config["NAME"], autocommit=True, **admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory, pg_database) -> Iterator[LiveServer]:
    """A gunicorn of the module's own: a file queue and, with a PostgreSQL server, a queue
    on the PostgreSQL store."""
    live = LiveServer(tmp_path_factory.mktemp("gone"))
    if pg_database is not None:
        live.extra_env["TASKHOSTER_PG_STORE_URL"] = pg_database
    live.prepare()
    stores = {"files": QUEUES["files"]}
    if pg_database is not None:
        stores["postgres"] = QUEUES["postgres"]
    live.manage("shell", "-c", (
        "from queues.services import grant, save_queue\n"
        f"for kind, name in {stores!r}.items():\n"
        f"    save_queue({HOST!r}, name, store=kind, lease_seconds=60, max_attempts=3)\n"
        "    for user, role in (('olga', 'operator'), ('paul', 'producer'), ('wendy', 'worker')):\n"
        f"        grant(user, {HOST!r} + '/' + name, role)\n"))  # fmt: skip
    live.start()
    yield live
    live.stop()


@pytest.fixture
def queue(server, request, pg_database) -> str:
    kind = request.param
    if kind == "postgres" and pg_database is None:
        pytest.skip("a PostgreSQL queue needs a server: the suite's PostgreSQL run "
                    "(make test-postgres), or TASKHOSTER_PG_STORE_URL set")  # fmt: skip
    return QUEUES[kind]


def _waiting_claim(server: LiveServer, queue: str) -> socket.socket:
    """A raw connection whose claim (wait 20 s) is being held by the server."""
    where = urlsplit(server.url)
    sock = socket.create_connection((where.hostname, where.port), timeout=10)
    body = json.dumps({"worker": "box-1", "wait": 20}).encode()
    sock.sendall(
        f"POST /api/v1/queues/{HOST}/{queue}/claim HTTP/1.1\r\nHost: {where.netloc}\r\n"
        f"Authorization: Bearer {server.tokens['wendy']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    sock.settimeout(0.5)
    with pytest.raises(TimeoutError):  # no answer yet: it waits
        sock.recv(1)
    return sock


def _post_and_check_untouched(server: LiveServer, queue: str) -> None:
    producer = Client(server.url, server.tokens["paul"], timeout=15)
    operator = Client(server.url, server.tokens["olga"], timeout=15)
    task_id = producer.post(HOST, queue, {"n": 1})["id"]
    time.sleep(SETTLE)
    left = operator.get(HOST, queue, task_id)
    assert (left["status"], left["attempts"]) == ("pending", 0), left
    assert "worker" not in left  # an operator would see the worker holding its lease
    worker = Client(server.url, server.tokens["wendy"], timeout=15)
    claimed = worker.claim(HOST, queue, "box-2")
    assert claimed is not None and (claimed["id"], claimed["attempts"]) == (task_id, 1)
    worker.result(HOST, queue, task_id, "box-2", 1, {"ok": True})


@pytest.mark.parametrize("queue", STORES, indirect=True)
def test_a_claim_whose_client_closed_its_socket_while_it_waited_takes_nothing(server, queue):
    _waiting_claim(server, queue).close()
    _post_and_check_untouched(server, queue)


CHILD = """
import sys
from taskhoster.client import Client
print("claiming", flush=True)
Client(sys.argv[1], sys.argv[2], timeout=60).claim(sys.argv[3], sys.argv[4], "box-1", wait=20)
print("claimed", flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("queue", STORES, indirect=True)
def test_a_claim_whose_worker_process_is_killed_while_it_waits_takes_nothing(server, queue, signum):
    argv = [sys.executable, "-c", CHILD, server.url, server.tokens["wendy"], HOST, queue]
    child = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "claiming"
        time.sleep(1.0)  # its claim reached the server and waits
        assert child.poll() is None
        child.send_signal(signum)
        assert child.wait(timeout=10) == -signum
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    _post_and_check_untouched(server, queue)
