"""Event lines as the store writes them, day-files in the test's own logs directory, and a
database that other processes can reach (for the concurrent and --follow runs)."""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.db import connection

from tests.migrated import migrate

ROOT = Path(__file__).resolve().parents[2]
DAY1 = 1_735_689_600  # 2025-01-01T00:00:00Z
TASK = "0123456789abcdef"


def line(
    *,
    t: int = DAY1,
    ms: int = 0,
    host: str = "task.example.com",
    queue: str = "resize",
    task_id: str = TASK,
    event: str = "posted",
    status: str = "pending",
    attempts: int = 0,
    worker: str | None = None,
    sizes: dict[str, int] | None = None,
    archived: list[str] | None = None,
) -> dict[str, Any]:
    at = dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms:03d}Z"
    return {
        "t": t, "at": at, "host": host, "queue": queue, "id": task_id, "event": event,
        "status": status, "attempts": attempts, "worker": worker,
        "bytes": sizes or {"item": 12, "progress": 0, "result": 0, "error": 0},
        "archived": archived or [],
    }  # fmt: skip


def encode(*lines: dict[str, Any] | bytes) -> bytes:
    return b"".join(x if isinstance(x, bytes) else orjson.dumps(x) + b"\n" for x in lines)


@pytest.fixture
def day_dir(store_dirs: dict[str, Path]) -> Path:
    folder = store_dirs["logs"] / "tasks"
    folder.mkdir()
    return folder


@pytest.fixture
def append(day_dir: Path) -> Callable[..., Path]:
    """`append("2025-01-01", line(...), b"raw")`: what the store's O_APPEND writes do."""

    def write(day: str, *lines: dict[str, Any] | bytes) -> Path:
        path = day_dir / f"{day}.jsonl"
        with path.open("ab") as f:
            f.write(encode(*lines))
        return path

    return write


def manage(
    url: str, *args: str, env_extra: dict[str, str] | None = None, **popen: Any
) -> subprocess.Popen[str]:
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-only", "PYTHONPATH": str(ROOT)}
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, text=True, **popen)


@pytest.fixture
def live_db(transactional_db: None, tmp_path: Path) -> tuple[str, Callable[[], list[tuple]]]:
    """A database URL for child processes and a function listing the stored (file, offset)s.

    SQLite's test database lives in this process's memory, so children get a migrated file of
    their own; on PostgreSQL they share the test database, which `transactional_db` commits to.
    """
    if connection.vendor == "sqlite":
        path = tmp_path / "live.sqlite3"
        url = f"sqlite:///{path}"
        migrate({**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-only"})

        def keys() -> list[tuple]:
            with sqlite3.connect(path) as db:
                return db.execute('SELECT file, "offset" FROM tasklogs_taskevent').fetchall()

        return url, keys
    s = connection.settings_dict
    url = f"postgres://{s['USER']}:{s['PASSWORD'] or ''}@{s['HOST']}:{s['PORT']}/{s['NAME']}"

    def pg_keys() -> list[tuple]:
        from tasklogs.models import TaskEvent

        return list(TaskEvent.objects.values_list("file", "offset"))

    return url, pg_keys
