"""`manage.py serve` (what `make run` runs): everything starts together and stops together."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def site_env(tmp_path):
    env = {
        "PATH": os.environ["PATH"], "DEBUG": "1", "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
        "TASKHOSTER_ITEMS_DIR": str(tmp_path / "items"),
        "TASKHOSTER_LOGS_DIR": str(tmp_path / "logs"),
        "TASKHOSTER_FSYNC": "0", "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
    }  # fmt: skip
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return env


def children_of(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(line) for line in found.split()]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def test_serve_runs_web_sweep_and_ingest_and_ctrl_c_stops_them_all(site_env):
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT, env=site_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not answers(f"http://127.0.0.1:{port}/admin/login/"):
            assert time.monotonic() < deadline, "the web server never answered"
            assert serve.poll() is None, "serve ended early"
            time.sleep(0.3)
        children = children_of(serve.pid)
        assert len(children) == 3  # gunicorn, sweep --loop, ingest_tasklogs --follow
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=30) == 0
        assert not answers(f"http://127.0.0.1:{port}/admin/login/")
        for child in children:
            assert (
                not Path(f"/proc/{child}").exists()
                or "zombie" in Path(f"/proc/{child}/status").read_text()
            )
    finally:
        if serve.poll() is None:
            serve.kill()


def test_serve_stops_everything_and_fails_when_one_part_cannot_start(site_env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        serve = subprocess.run(
            [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}"],
            cwd=ROOT, env=site_env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert serve.returncode == 1
