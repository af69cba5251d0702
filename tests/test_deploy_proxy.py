"""deploy/nginx/taskhoster.conf run as it is (its ports, upstream and certificate paths moved to
this test's) by a real nginx in front of a real gunicorn with gunicorn.conf.py: slow clients
wait in nginx, and gunicorn's threads stay free for everyone else."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api_live.live import HOST, QUEUE, ROOT, LiveServer, free_port

DEPLOY_FILE = ROOT / "deploy" / "nginx" / "taskhoster.conf"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
)
# CI sets TASKHOSTER_REQUIRE_NGINX=1, so a missing nginx fails these tests instead of skipping
needs_nginx = pytest.mark.skipif(
    NGINX is None and not os.environ.get("TASKHOSTER_REQUIRE_NGINX"),
    reason="nginx is not installed (apt-get install nginx; scripts/ensure-test-tools does it)",
)
SLOW_CLIENTS = 140  # of each kind: more than gunicorn.conf.py's 2 workers x 64 threads
# the control without the proxy: the kernel hands connections to the two workers unevenly, so
# 140 can leave one worker a free thread (seen in a CI run); twice the threads hold them all
SLOW_CLIENTS_ALONE = 2 * 2 * 64 + 20
ROOT_TIMEOUT = 10.0  # what a client of GET /api/v1/ waits (the measure)


def test_the_proxys_body_cap_is_the_servers():
    from taskhoster_site import settings

    text = DEPLOY_FILE.read_text()
    cap = int(re.search(r"client_max_body_size (\d+);", text).group(1))
    assert cap == settings.TASKHOSTER_MAX_BODY_BYTES
    assert f"cap of {cap} bytes" in text  # its 413 says the same number


def _moved(text: str, *, https: int, http: int, upstream: int, cert: Path, key: Path) -> str:
    """The deploy file with this test's ports and certificate: each line it changes must be
    there, so the file cannot drift from what runs here."""
    changes = {
        "listen 443 ssl http2;": f"listen 127.0.0.1:{https} ssl http2;",
        "listen [::]:443 ssl http2;": "",
        "listen 80;": f"listen 127.0.0.1:{http};",
        "listen [::]:80;": "",
        "server 127.0.0.1:8000;": f"server 127.0.0.1:{upstream};",
        "/etc/letsencrypt/live/task.example.com/fullchain.pem": str(cert),
        "/etc/letsencrypt/live/task.example.com/privkey.pem": str(key),
    }
    for old, new in changes.items():
        assert old in text, f"the deploy file no longer has {old!r}"
        text = text.replace(old, new)
    return text


def _main_conf(prefix: Path, site: Path) -> str:
    """The http block a Debian nginx.conf gives, in this test's own directory."""
    return f"""
user root;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include {site};
}}
"""


def _wait_for_port(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited at start")
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start within 30 s")


@contextlib.contextmanager
def _gunicorn(tmp: Path) -> Iterator[LiveServer]:
    """gunicorn as production runs it: gunicorn.conf.py's workers and threads, only its bind
    moved; with the live tests' queues and tokens."""
    server = LiveServer(tmp)
    server.prepare()
    argv = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),
            "--bind", f"127.0.0.1:{server.port}", "--access-logfile", "/dev/null",
            "taskhoster_site.wsgi:application"]  # fmt: skip
    own = ("TASKHOSTER_WEB_THREADS", "TASKHOSTER_WEB_WORKERS")  # gunicorn.conf.py's defaults
    env = {k: v for k, v in server.env().items() if k not in own}
    proc = subprocess.Popen(argv, env=env, cwd=ROOT)
    try:
        _wait_for_port(server.port, proc, "gunicorn")
        yield server
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.contextmanager
def _nginx(tmp: Path, upstream: int) -> Iterator[int]:
    assert NGINX is not None, "TASKHOSTER_REQUIRE_NGINX=1 and no nginx on this machine"
    prefix = tmp / "nginx"
    prefix.mkdir()
    key, cert = prefix / "key.pem", prefix / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=task.example.com", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    https, http = free_port(), free_port()
    site = prefix / "taskhoster.conf"
    site.write_text(_moved(DEPLOY_FILE.read_text(), https=https, http=http, upstream=upstream,
                           cert=cert, key=key))  # fmt: skip
    main = prefix / "nginx.conf"
    main.write_text(_main_conf(prefix, site))
    argv = [NGINX, "-p", str(prefix), "-c", str(main)]
    checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    proc = subprocess.Popen([*argv, "-g", "daemon off;"])
    try:
        _wait_for_port(https, proc, "nginx")
        yield https
    finally:
        proc.terminate()
        proc.wait(30)


def _tls() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the test's own certificate
    return context


def _connect(port: int, *, tls: bool) -> socket.socket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return _tls().wrap_socket(raw) if tls else raw


def _slow_clients(
    port: int, kind: str, token: str, *, tls: bool, count: int = SLOW_CLIENTS
) -> list[socket.socket]:
    """SLOW_CLIENTS that send a request's header without its end ("header"), or a producer's
    post whose header is whole and whose item, promised to be 100,000 bytes, has only begun
    ("body": the API reads the body, as a post does); then they wait."""
    post = (f"POST /api/v1/queues/{HOST}/{QUEUE}/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n{\"a\": ")  # fmt: skip
    first = {"header": "GET /api/v1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", "body": post}
    held = []
    for _ in range(count):
        s = _connect(port, tls=tls)
        s.sendall(first[kind].encode())
        held.append(s)
    return held


def _connections_to(port: int) -> int:
    """How many TCP connections to 127.0.0.1:`port` are established (the kernel's table)."""
    found = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        found += remote == f"0100007F:{port:04X}" and state == "01"
    return found


def _get_root(port: int, *, tls: bool) -> tuple[int, bytes]:
    """GET /api/v1/ as a client that waits ROOT_TIMEOUT: its status and body."""
    with _connect(port, tls=tls) as s:
        s.settimeout(ROOT_TIMEOUT)
        s.sendall(b"GET /api/v1/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@needs_nginx
@pytest.mark.parametrize("kind", ["header", "body"])
def test_slow_clients_in_front_of_nginx_leave_gunicorns_threads_free(tmp_path, kind):
    with _gunicorn(tmp_path) as server, _nginx(tmp_path, server.port) as port:
        held = _slow_clients(port, kind, server.tokens["paul"], tls=True)
        try:
            # counted, not timed: nginx opened no connection to gunicorn for any of them (without
            # proxy_request_buffering it opens one per slow body at once, each holding a thread
            # until client_body_timeout)
            assert _connections_to(server.port) == 0
            status, body = _get_root(port, tls=True)
            assert status == 200 and "docs" in json.loads(body)
            # and nginx ends what it holds: a header not whole within client_header_timeout, a
            # body that paused past client_body_timeout (both 10 s)
            deadline = time.monotonic() + 30
            for s in held:
                s.settimeout(max(deadline - time.monotonic(), 0.1))
                with contextlib.suppress(ssl.SSLError, ConnectionError):
                    while s.recv(4096):
                        pass  # a 408 or nothing, then the end of the connection
        finally:
            for s in held:
                s.close()
        assert time.monotonic() < deadline, "nginx kept slow clients past its timeouts"


@needs_nginx
def test_a_body_over_the_servers_cap_is_refused_by_nginx_in_the_apis_shape(tmp_path):
    with _gunicorn(tmp_path) as server, _nginx(tmp_path, server.port) as port:
        with _connect(port, tls=True) as s:
            s.sendall(b"POST /api/v1/queues/task.example.com/q/tasks HTTP/1.1\r\n"
                      b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 16842753\r\nConnection: close\r\n\r\n")  # fmt: skip
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split(b" ", 2)[1] == b"413"
        assert json.loads(body)["code"] == "payload_too_large"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["header", "body"])
def test_without_the_proxy_the_same_slow_clients_hold_every_gunicorn_thread(tmp_path, kind):
    """The loads above are real ones: against gunicorn alone, GET /api/v1/ gets no answer
    within ROOT_TIMEOUT while slow clients of the same kind hold its threads (why the proxy
    is there)."""
    with _gunicorn(tmp_path) as server:
        held = _slow_clients(
            server.port, kind, server.tokens["paul"], tls=False, count=SLOW_CLIENTS_ALONE
        )
        try:
            with pytest.raises(TimeoutError):
                _get_root(server.port, tls=False)
        finally:
            for s in held:
                s.close()
