"""gunicorn.conf.py as gunicorn itself reads it (`--print-config`, in a real process)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def config(**env: str) -> dict[str, str]:
    gunicorn = Path(sys.executable).parent / "gunicorn"
    done = subprocess.run(
        [str(gunicorn), "-c", "gunicorn.conf.py", "--print-config", "taskhoster_site.wsgi"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
        check=True,
    )  # fmt: skip
    pairs = (line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return {name.strip(): value.strip() for name, value in pairs}


def test_the_control_socket_is_this_installations_own_under_var(tmp_path):
    assert config(TASKHOSTER_VAR_DIR=str(tmp_path))["control_socket"] == str(
        tmp_path / "gunicorn.ctl"
    )
    # a relative var/ is the project's (as settings.VAR_DIR)
    assert config(TASKHOSTER_VAR_DIR="var")["control_socket"] == str(ROOT / "var" / "gunicorn.ctl")


def test_a_count_not_in_ascii_digits_stops_gunicorn_naming_it():
    gunicorn = Path(sys.executable).parent / "gunicorn"
    for variable, value in (("TASKHOSTER_WEB_THREADS", "٦٤"), ("TASKHOSTER_WEB_WORKERS", "1_0")):
        done = subprocess.run(
            [str(gunicorn), "-c", "gunicorn.conf.py", "--print-config", "taskhoster_site.wsgi"],
            cwd=ROOT, env={**os.environ, variable: value}, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert done.returncode != 0
        assert f"{variable} must be an integer in the digits 0-9" in done.stdout + done.stderr


def served(tmp_path: Path, *options: str) -> list[str]:
    """The access log's request lines of a real gunicorn run with gunicorn.conf.py, after one
    request of each kind."""
    import http.client
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "access.log"
    gunicorn = Path(sys.executable).parent / "gunicorn"
    argv = [str(gunicorn), "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{port}",
            "--workers", "1", "--access-logfile", str(log), *options,
            "tests.access_log_app:app"]  # fmt: skip
    env = {**os.environ, "TASKHOSTER_VAR_DIR": str(tmp_path)}
    server = subprocess.Popen(argv, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    requests = [("POST", "/api/v1/queues/h.example/q/claim"),
                ("POST", "/api/v1/queues/h.example/q/claim?status=403"),
                ("GET", "/api/v1/queues/h.example/q/tasks/abc?wait=5"),
                ("GET", "/api/v1/queues/h.example/q/tasks/abc"),
                ("GET", "/static/console.css"),
                ("GET", "/console/")]  # fmt: skip

    def ask(method: str, path: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(method, path)
        conn.getresponse().read()
        conn.close()

    def logged() -> list[str]:
        text = log.read_text() if log.exists() else ""
        return [line.split('"')[1] for line in text.splitlines()]

    try:
        # until its worker logs: a request the master accepted before that may go unlogged
        deadline = time.monotonic() + 30
        while "GET /warm-up HTTP/1.1" not in logged():
            assert time.monotonic() < deadline and server.poll() is None
            with contextlib.suppress(OSError):
                ask("GET", "/warm-up")
            time.sleep(0.2)
        for method, path in requests:
            ask(method, path)
        ask("GET", "/last")
        while "GET /last HTTP/1.1" not in logged():
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        server.terminate()
        server.wait(30)
    # Every line is in once the server has stopped; a request's line is written after its
    # answer was sent, so under load one may come after the next request's, even after /last's.
    lines = logged()
    return [line for line in lines[lines.index("GET /warm-up HTTP/1.1") + 1 :]
            if line != "GET /last HTTP/1.1"]  # fmt: skip


def test_the_access_log_leaves_out_successful_claims_waiting_reads_and_static_files(tmp_path):
    assert [line for line in served(tmp_path) if line != "GET /warm-up HTTP/1.1"] == [
        "POST /api/v1/queues/h.example/q/claim?status=403 HTTP/1.1",  # refused: still said
        "GET /api/v1/queues/h.example/q/tasks/abc HTTP/1.1",
        "GET /console/ HTTP/1.1",
    ]


def test_with_log_level_debug_the_access_log_has_every_request(tmp_path):
    said = [line for line in served(tmp_path, "--log-level", "debug") if "warm-up" not in line]
    assert len(said) == 6
