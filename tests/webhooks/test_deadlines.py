"""A receiver that trickles its answer a byte a second (a real socket server in a thread) is cut
off at the call's deadline, a pass of such sends ends within the pass's seconds leaving the rest
due, and the sweep's own work (a lapsed lease) is done whatever the receivers do.

Each of these receivers would take 60 s to answer; the assertions allow three times the deadline
or the pass's seconds, so a slow machine does not fail them and the old behaviour (a call held
as long as bytes keep coming) cannot pass them.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.utils import timezone

from queues import stores
from queues.store import QueueSettings, QueueStore, StoreConfig
from tests.migrated import migrate
from webhooks.models import Delivery, Kind, Notification, State, Webhook
from webhooks.notifying import notify
from webhooks.sending import post

from ..children import interrupted, reaped

pytestmark = pytest.mark.django_db
TRICKLE_SECONDS = 60
ROOT = Path(__file__).resolve().parents[2]
HOST, QUEUE = "task.example.com", "resize"


def trickle(scheme: str, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """The URL of a receiver that reads the request, then sends one byte of a status line that
    never ends each second for a minute: every single read gets a byte well within 5 s."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(raw: socket.socket) -> None:
        try:
            conn = tls.wrap_socket(raw, server_side=True) if tls else raw
        except OSError:
            return
        with conn:
            conn.recv(65536)
            for _ in range(TRICKLE_SECONDS):
                if stop.wait(1.0):
                    return
                try:
                    conn.sendall(b"H")
                except OSError:
                    return  # the caller gave up

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"{scheme}://127.0.0.1:{server.getsockname()[1]}/hook"
    stop.set()
    with contextlib.suppress(OSError):
        server.shutdown(socket.SHUT_RDWR)  # wakes the accept(), which a close alone does not
    server.close()
    thread.join(timeout=5)
    assert not thread.is_alive(), "the receiver's accept loop did not end"


@pytest.fixture
def trickler() -> Iterator[str]:
    yield from trickle("http")


@pytest.fixture
def tls_trickler(tmp_path, monkeypatch) -> Iterator[str]:
    """The same over TLS, with a certificate for 127.0.0.1 that the caller is made to trust."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # what ssl.create_default_context() trusts
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    yield from trickle("https", context)


@pytest.fixture
def slow_hook(make_queue, trickler, settings) -> Webhook:
    settings.TASKHOSTER_WEBHOOK_ALLOW_PRIVATE = True
    settings.TASKHOSTER_WEBHOOK_DEADLINE_SECONDS = 1.0
    settings.TASKHOSTER_WEBHOOK_PASS_SECONDS = 3.0
    hook = Webhook(queue=make_queue(), url=trickler)
    hook.full_clean()
    hook.save()
    return hook


def due_notifications(hook: Webhook, n: int) -> list[Notification]:
    now = timezone.now()
    fields = {"webhook": hook, "kind": Kind.TASK_FAILED, "body": "{}"}
    return [
        Notification.objects.create(**fields, source=f"test:{i}", next_try_at=now, created_at=now)
        for i in range(n)
    ]


def test_a_call_to_a_trickling_receiver_ends_by_its_deadline(trickler):
    started = time.monotonic()
    answer = post(trickler, b"{}", {}, allow_private=True, deadline=2.0)
    took = time.monotonic() - started
    assert took < 3 * 2.0, f"the call took {took:.1f} s"
    assert answer.status is None
    assert answer.error == "timed out: no whole answer within the 2 s deadline"


def test_a_call_over_tls_to_a_trickling_receiver_ends_by_its_deadline(tls_trickler):
    started = time.monotonic()
    answer = post(tls_trickler, b"{}", {}, allow_private=True, deadline=2.0)
    took = time.monotonic() - started
    assert took < 3 * 2.0, f"the call took {took:.1f} s"
    assert answer.error == "timed out: no whole answer within the 2 s deadline"


def test_a_pass_of_slow_sends_ends_within_its_seconds_and_leaves_the_rest_due(slow_hook):
    notes = due_notifications(slow_hook, 6)
    started = time.monotonic()
    report = notify(stores.router(), now=timezone.now())
    took = time.monotonic() - started
    assert took < 3 * 3.0, f"the pass took {took:.1f} s"
    # at most three sends of 1 s fit in 3 s (two, when each takes a little over its second);
    # the others are not started
    assert report.delivered == 0 and 1 <= report.failed <= 3
    tried = list(Delivery.objects.values_list("error", flat=True))
    assert tried == ["timed out: no whole answer within the 1 s deadline"] * report.failed
    waiting = Notification.objects.filter(tries=0)
    assert waiting.count() == 6 - report.failed
    for note in waiting:  # untouched: still due, as they were
        assert note.state == State.PENDING
        assert note.next_try_at == next(n.next_try_at for n in notes if n.pk == note.pk)


def test_a_sweep_pass_with_slow_receivers_still_hands_back_a_lapsed_lease(slow_hook):
    due_notifications(slow_hook, 20)
    queue = slow_hook.queue
    settings, host, name = queue.to_settings(), queue.host.name, queue.name
    store = stores.of(host, name)
    task = store.post(host, name, {"n": 1}, settings=settings, posted_by="alice").task
    long_ago = int(time.time() * 1000) - 3_600_000  # its lease lapsed long since
    store.claim(host, name, settings=settings, worker="box-1", lease_seconds=30, now=long_ago)
    assert store.read(host, name, task.id).status == "processing"

    started = time.monotonic()
    call_command("sweep", stdout=io.StringIO())
    took = time.monotonic() - started

    assert took < 3 * 3.0, f"the sweep pass took {took:.1f} s"
    assert stores.of(host, name).read(host, name, task.id).status == "pending"
    assert Notification.objects.filter(tries=0).count() >= 20 - 3  # sent in later passes


@pytest.mark.parametrize(
    ("name", "value"),
    [("TASKHOSTER_WEBHOOK_DEADLINE_SECONDS", 0.0), ("TASKHOSTER_WEBHOOK_PASS_SECONDS", -5.0),
     ("TASKHOSTER_WEBHOOK_DEADLINE_SECONDS", float("nan"))],
)  # fmt: skip
def test_a_time_limit_that_is_not_above_zero_is_refused_by_the_checks(settings, name, value):
    setattr(settings, name, value)
    with pytest.raises(SystemCheckError, match=f"{name} is {value!r}; it must be a number"):
        call_command("check")


@pytest.mark.slow
def test_the_sweep_loop_hands_back_a_lapsed_lease_while_its_notifications_are_slow(
    trickler, tmp_path
):
    """`sweep --loop` as a process, its notifications due at the trickling receiver: the store's
    sweep keeps its own pace meanwhile, so a lease that lapses while the sends of a 20 s pass
    are under way is handed back at once, not after them."""
    db = tmp_path / "db.sqlite3"
    env = {
        "PATH": os.environ["PATH"], "DEBUG": "1", "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{db}", "TASKHOSTER_ITEMS_DIR": str(tmp_path / "items"),
        "TASKHOSTER_LOGS_DIR": str(tmp_path / "logs"), "TASKHOSTER_FSYNC": "0",
        "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
        "TASKHOSTER_WEBHOOK_ALLOW_PRIVATE": "1",
        "TASKHOSTER_WEBHOOK_DEADLINE_SECONDS": "5", "TASKHOSTER_WEBHOOK_PASS_SECONDS": "20",
        "TASKHOSTER_METRICS_DIR": "metrics",  # under var/, not in /dev/shm
    }  # fmt: skip
    manage = [sys.executable, str(ROOT / "manage.py")]
    migrate(env)
    subprocess.run([*manage, "createqueue", HOST, QUEUE, "--lease-seconds", "10"],
                   cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip
    with sqlite3.connect(db) as conn:
        (queue_id,) = conn.execute("SELECT id FROM queues_queue").fetchone()
        hook = conn.execute(
            "INSERT INTO webhooks_webhook (queue_id, url, secret, notify_failed,"
            " pending_threshold, pending_alerted, created_at)"
            " VALUES (?, ?, 's3cret', 1, 0, 0, '2000-01-01 00:00:00')",
            (queue_id, trickler),
        ).lastrowid
        conn.executemany(
            "INSERT INTO webhooks_notification (webhook_id, kind, task_id, source, body, state,"
            " tries, next_try_at, created_at) VALUES (?, 'task.failed', '', ?, '{}', 'pending',"
            " 0, '2000-01-01 00:00:00', '2000-01-01 00:00:00')",
            [(hook, f"test:{i}") for i in range(10)],
        )
    out = tmp_path / "out"
    with open(out, "w") as stdout:
        command = [*manage, "sweep", "--loop", "--interval", "0.1"]
        loop = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True
        )
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=tmp_path / "logs",
                                   fsync=False))  # fmt: skip
    try:
        with reaped(loop):
            wait_until(lambda: sent(db) > 0)  # a send to the receiver is under way
            settings = QueueSettings(lease_seconds=10)
            store.post(HOST, QUEUE, {"n": 1}, settings=settings, posted_by="a")
            long_ago = int(time.time() * 1000) - 60_000
            store.claim(HOST, QUEUE, settings=settings, worker="w", now=long_ago)
            lapsed = time.monotonic()
            wait_until(lambda: "requeue=1" in out.read_text(), seconds=60)
            waited = time.monotonic() - lapsed
            assert waited < 10, f"handed back {waited:.1f} s after it lapsed"
            _, err = interrupted(loop)
    finally:
        store.close()
    assert "Traceback" not in err


def sent(db: Path) -> int:
    """The notifications a sweep took to send (their next try moved on from 2000)."""
    with sqlite3.connect(db, timeout=5) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM webhooks_notification WHERE next_try_at > '2001-01-01'"
        ).fetchone()
    return n


def wait_until(condition: Callable[[], bool], seconds: float = 30) -> None:
    ends = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < ends, "not within the wait"
        time.sleep(0.05)
