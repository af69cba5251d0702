"""Two sweep processes racing on the same due times post each of them once."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from queues.store import QueueStore, StoreConfig
from tests.tasklogs.conftest import ROOT, live_db  # noqa: F401 (live_db is a fixture)

pytestmark = pytest.mark.slow


def test_two_sweep_processes_post_each_due_time_once(live_db, tmp_path: Path, store_dirs):  # noqa: F811
    url, _ = live_db
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-only", "PYTHONPATH": str(ROOT),
           "TASKHOSTER_ITEMS_DIR": str(store_dirs["items"]),
           "TASKHOSTER_LOGS_DIR": str(store_dirs["logs"]), "TASKHOSTER_FSYNC": "0"}  # fmt: skip

    def run(*args: str, **popen) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, text=True, **popen)

    assert run("manage.py", "createqueue", "task.example.com", "resize").wait(60) == 0
    assert run("manage.py", "createschedule", "task.example.com", "resize", "every-minute",
               "* * * * *", "--item", '{"job": "tick"}').wait(60) == 0  # fmt: skip
    # Twenty minutes that begin a day from now, so that the schedule (made now) owes each one.
    first_due = (int(time.time()) // 60 + 24 * 60) * 60
    go = tmp_path / "go"
    sweeps = [run("-m", "tests.schedules.passes", str(first_due + 30), "20", str(go),
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]  # fmt: skip
    go.touch()
    outputs = [sweep.communicate(timeout=120) for sweep in sweeps]
    assert [sweep.returncode for sweep in sweeps] == [0, 0], outputs
    store = QueueStore(StoreConfig(items_dir=store_dirs["items"], logs_dir=store_dirs["logs"],
                                   fsync=False, log_retain_days=21))  # fmt: skip
    tasks = store.list_tasks("task.example.com", "resize", limit=100).tasks
    assert len(tasks) == 20
    due_times = sorted(int(task.idempotency_key.rsplit(":", 1)[1]) for task in tasks)
    assert due_times == [first_due + 60 * minute for minute in range(20)]
