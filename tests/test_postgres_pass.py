"""Which tests the suite's PostgreSQL pass keeps (tests/conftest.py), as pytest collects them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# one module on Django's database, one without it, one marked `postgres` without the fixtures
FILES = [
    "tests/test_tokens.py",
    "tests/test_durations.py",
    "tests/api_live/test_two_servers_live.py",
]


def collected(database_url: str) -> list[str]:
    """The test ids pytest collects from FILES with Django's database at `database_url`
    (collecting connects to no server)."""
    env = {**os.environ, "DATABASE_URL": database_url}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", *FILES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def files_of(ids: list[str]) -> set[str]:
    return {test_id.split("::")[0] for test_id in ids}


def test_the_postgresql_pass_keeps_the_database_tests_and_the_marked_ones():
    ids = collected("postgres://nobody@127.0.0.1:1/unused")
    assert files_of(ids) == {"tests/test_tokens.py", "tests/api_live/test_two_servers_live.py"}


def test_the_sqlite_pass_keeps_everything(tmp_path):
    ids = collected(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert files_of(ids) == set(FILES)
