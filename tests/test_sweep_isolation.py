"""One queue whose sweep fails in a way the store did not foresee: the pass logs it with its
traceback, names the queue among the pass's errors, and sweeps every other queue all the same.

The failure is real: a stale temp file in the queue's pending/ made immutable (chattr +i), which
the store's temp cleanup tries to unlink and even root may not (EPERM, an OSError the store
does not turn into one of its own errors, nor takes for a disk refusing)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

from queues import stores
from queues.store import QueueSettings, QueueStore, StoreConfig, files
from tests.migrated import migrate

ROOT = Path(__file__).resolve().parent.parent


LONG_AGO_MS = int(time.time() * 1000) - 120_000  # two minutes: a 10 s lease has lapsed


@contextlib.contextmanager
def sweep_broken(queue_dir: Path) -> Iterator[None]:
    """An immutable stale temp in the queue's pending/ for the block (skips without chattr)."""
    stale = queue_dir / "pending" / f"{files.TEMP_PREFIX}left-by-hand"
    stale.write_bytes(b"{}")
    os.utime(stale, (0, 0))  # older than any temp file's writer could still be alive
    if subprocess.run(["chattr", "+i", str(stale)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here (not root, or a file system without it)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(stale)], check=True)


def lapsed_lease(store, queue) -> str:
    settings = queue.to_settings()
    task = store.post(queue.host.name, queue.name, {"n": 1}, settings=settings,
                      posted_by="alice").task  # fmt: skip
    store.claim(queue.host.name, queue.name, settings=settings, worker="w", now=LONG_AGO_MS)
    return task.id


@pytest.mark.django_db
def test_one_queue_failing_its_sweep_leaves_the_others_swept(make_queue, store_dirs, caplog):
    # "a-broken" sorts first: the queues after it in the pass are the ones at stake
    broken = make_queue("task.example.com", "a-broken", lease_seconds=10)
    healthy = [make_queue("task.example.com", name, lease_seconds=10) for name in ("b", "c")]
    lapsed = {
        queue.name: lapsed_lease(stores.of(queue.host.name, queue.name), queue)
        for queue in (broken, *healthy)
    }
    out, err = io.StringIO(), io.StringIO()
    with (
        sweep_broken(store_dirs["items"] / "task.example.com" / "a-broken"),
        caplog.at_level(logging.ERROR),
    ):
        call_command("sweep", stdout=out, stderr=err)

    for queue in healthy:
        assert (
            stores.of(queue.host.name, queue.name)
            .read(queue.host.name, queue.name, lapsed[queue.name])
            .status
            == "pending"
        )
    assert "requeue=2" in out.getvalue()
    assert "task.example.com/a-broken" in err.getvalue()
    [logged] = [r for r in caplog.records if "task.example.com/a-broken" in r.getMessage()]
    assert logged.exc_info is not None and logged.exc_info[0] is PermissionError
    # nothing of the broken queue was lost: its task is still there, waiting for a sweep
    assert (
        stores.of(broken.host.name, broken.name)
        .read(broken.host.name, broken.name, lapsed["a-broken"])
        .status
        == "processing"
    )


@pytest.mark.slow
def test_the_chaos_run_finds_the_error_in_the_sweep_loop_log(tmp_path):
    """The loop goes on after such an error, so the chaos run fails on its line instead."""
    from chaos.run import unforeseen_sweep_errors

    env = {
        "PATH": os.environ["PATH"], "DEBUG": "1", "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "TASKHOSTER_ITEMS_DIR": str(tmp_path / "items"),
        "TASKHOSTER_LOGS_DIR": str(tmp_path / "logs"),
        "TASKHOSTER_FSYNC": "0", "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
        "TASKHOSTER_METRICS_DIR": "metrics",  # under var/, not in /dev/shm
    }  # fmt: skip
    manage = [sys.executable, str(ROOT / "manage.py")]
    migrate(env)
    for name in ("a-broken", "b"):
        subprocess.run([*manage, "createqueue", "task.example.com", name], cwd=ROOT, env=env,
                       check=True, capture_output=True)  # fmt: skip
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=tmp_path / "logs",
                                   fsync=False))  # fmt: skip
    for name in ("a-broken", "b"):
        store.post("task.example.com", name, {"n": 1}, settings=QueueSettings(), posted_by="a")
    store.close()
    log = tmp_path / "sweeper.log"
    log.write_text("2026-12-01T00:00:00Z 1 queue swept: requeue=1\n")
    assert unforeseen_sweep_errors(log) == []
    with (
        sweep_broken(tmp_path / "items" / "task.example.com" / "a-broken"),
        open(log, "wb") as out,
    ):
        subprocess.run([*manage, "sweep"], cwd=ROOT, env=env, stdout=out,
                       stderr=subprocess.STDOUT, check=True)  # fmt: skip
    [line] = unforeseen_sweep_errors(log)
    assert line.startswith("task.example.com/a-broken: the sweep failed (PermissionError")
