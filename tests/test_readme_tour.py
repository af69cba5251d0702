"""The README's tour runs as written, top to bottom, on a fresh copy of the checkout: `make run`
in one shell (its first run: the admin, the demo queue, the server), the tour's shell blocks
(those marked `<!-- tour -->`) in another, with nothing made beforehand. Its only change is the
port, a free one for 8000. The copy shares this checkout's .venv (a clone's first `make run`
would install the same into its own): so the install is the one thing not run here (the
Makefile's install lines have their own test in tests/test_makefile.py)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOUR_BLOCK = re.compile(r"<!-- tour -->\n```sh\n(.*?)```", re.S)
# What the first `make run` may print before its URL: the admin's password file and the demo
# queue (a migration's lines, setuptools' box, were ~150 lines before).
MOST_LINES_BEFORE_URL = 5

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("make") is None or shutil.which("curl") is None,
        reason="the tour needs make and curl",
    ),
]


def tour_script(readme: str, port: int) -> str:
    blocks = TOUR_BLOCK.findall(readme)
    assert len(blocks) >= 4, "the README's tour blocks are marked <!-- tour -->"
    return "\n".join(blocks).replace("127.0.0.1:8000", f"127.0.0.1:{port}")


def fresh_copy(into: Path) -> Path:
    """The checkout's files as a clone has them (tracked ones, and new ones not ignored: this
    branch's own), with no var/ and this checkout's .venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    (into / ".venv").symlink_to(ROOT / ".venv")
    # older than the venv's install stamp, as in a checkout that installed it: no reinstall
    stamp = (ROOT / ".venv" / ".installed").stat().st_mtime - 60
    os.utime(into / "pyproject.toml", (stamp, stamp))
    return into


def clean_env() -> dict[str, str]:
    """A new user's shell: none of the test run's settings (databases, directories)."""
    ours = ("TASKHOSTER_", "DJANGO_", "DATABASE_", "PYTEST", "COV_")
    kept = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    return kept


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_the_readme_tour_runs_top_to_bottom_on_a_fresh_copy(tmp_path):
    if not (ROOT / ".venv" / ".installed").exists():
        pytest.skip("no installed .venv to share (make venv)")
    clone = fresh_copy(tmp_path / "taskhoster")
    port, env = free_port(), clean_env()
    # the server's own figures in this test's folder, not /dev/shm (what the suite checks)
    server_env = {**env, "TASKHOSTER_METRICS_DIR": str(tmp_path / "metrics")}
    server = subprocess.Popen(["make", "--no-print-directory", "run", f"PORT={port}"], cwd=clone,
                              env=server_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)  # fmt: skip
    try:
        before: list[str] = []
        assert server.stdout is not None
        for line in server.stdout:
            if f"taskhoster on http://127.0.0.1:{port}/" in line:
                break
            before.append(line.rstrip("\n"))
        else:
            pytest.fail("make run ended before its URL:\n" + "\n".join(before))
        assert len(before) <= MOST_LINES_BEFORE_URL, "\n".join(before)
        assert any("created admin user 'admin', password in" in line for line in before), before
        deadline = time.monotonic() + 60
        while not answers(f"http://127.0.0.1:{port}/login/"):
            assert time.monotonic() < deadline, "the server did not answer within 60 s"
            time.sleep(0.3)
        script = tour_script((clone / "README.md").read_text(), port)
        done = subprocess.run(["bash", "-e", "-u", "-o", "pipefail", "-c", script], cwd=clone,
                              env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    finally:
        os.killpg(server.pid, signal.SIGINT)  # Ctrl-C: serve stops all of it
        try:
            server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.communicate()
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    out = done.stdout
    assert '"result":{"bytes":2048}' in out.replace(" ", ""), out  # the worker's curl result
    assert '{"double": 42}' in out, out  # post --wait, done by the command line's worker
    assert re.search(r" result [0-9a-f]{16} finished attempts=1 worker=", out), out  # the watch
