"""`make test` skips the PostgreSQL run with one line where no server answers; CI refuses to."""

import socket
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "postgres_ready.py"


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(**env: str) -> subprocess.CompletedProcess:
    url = f"postgres://postgres@127.0.0.1:{unused_port()}/test"
    return subprocess.run(
        [sys.executable, str(SCRIPT)],
        env={"PATH": "/usr/bin:/bin", "TASKHOSTER_TEST_DATABASE_URL": url, **env},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_no_server_skips_with_one_line():
    done = run()
    assert done.returncode == 1
    assert done.stdout.startswith("skipping the PostgreSQL run: no server at postgres://")
    assert done.stdout.count("\n") == 1


def test_no_server_fails_where_postgres_is_required():
    done = run(TASKHOSTER_REQUIRE_POSTGRES="1")
    assert done.returncode == 2
    assert "required here and not reachable" in done.stderr
