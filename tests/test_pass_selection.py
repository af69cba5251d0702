"""Which tests the PostgreSQL pass keeps (the rule of tests/conftest.py), read from pytest's own
collection with Django's database set to a PostgreSQL URL (collection opens no connection)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
API_FILE = "tests/api/test_bad_inputs.py"  # run once per store, and uses Django's database
PLAIN_FILE = "tests/test_durations.py"  # neither


def collected(*paths: str) -> list[str]:
    env = {**os.environ, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", *paths],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode in (0, 5), run.stdout + run.stderr  # 5: every test left out
    return [line for line in run.stdout.splitlines() if "::" in line]


def test_the_postgres_pass_keeps_an_api_tests_postgres_run_and_leaves_out_its_file_store_run():
    ids = collected(API_FILE)
    assert any(i.endswith("[postgres]") for i in ids)
    assert not any("[files" in i for i in ids)


def test_the_postgres_pass_leaves_out_a_test_that_never_reaches_the_database():
    assert collected(PLAIN_FILE) == []
