import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from queues import stores
from queues.processes.sweeping import SweepTally
from queues.store import QueueSettings, QueueStore, StoreConfig, SweepReport
from tests.migrated import migrate

from .children import interrupted, reaped

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db


def sweep(*args: str) -> str:
    out = io.StringIO()
    call_command("sweep", *args, stdout=out)
    return out.getvalue()


def test_one_sweep_requeues_a_lapsed_lease_and_reports_it(make_queue):
    queue = make_queue(lease_seconds=10)
    store, settings = stores.of(queue.host.name, queue.name), queue.to_settings()
    task = store.post(queue.host.name, queue.name, {"n": 1}, settings=settings,
                      posted_by="alice").task  # fmt: skip
    long_ago = int(time.time() * 1000) - 60_000  # claimed a minute ago with a 10 s lease
    store.claim(queue.host.name, queue.name, settings=settings, worker="box-1", now=long_ago)
    out = sweep()
    assert "requeue=1" in out and "queues=1" in out
    assert store.read(queue.host.name, queue.name, task.id).status == "pending"
    assert "requeue=0" in sweep()


def test_a_queue_the_console_does_not_know_is_left_alone(make_queue, store_dirs):
    queue = make_queue()
    for host, name in (("stray.example", "orphan"), (queue.host.name, queue.name)):
        stores.of(host, name).post(
            host, name, {"n": 1}, settings=queue.to_settings(), posted_by=None
        )
    assert (store_dirs["items"] / "stray.example" / "orphan" / "pending").is_dir()
    assert "queues=1" in sweep()  # only the configured queue was swept


@pytest.mark.parametrize("interval", ["0", "-1"])
def test_a_bad_interval_is_refused(interval):
    with pytest.raises(CommandError, match="above 0"):
        sweep("--loop", "--interval", interval)


@pytest.mark.parametrize("interval", ["nan", "inf", "٣", "1_0"])
def test_an_interval_not_in_ascii_digits_is_refused(interval):
    """float() reads each of these: "inf" made the loop's sleep raise, "٣" was 3 seconds."""
    with pytest.raises(CommandError, match="--interval: the value must be a number in the digits"):
        sweep("--loop", "--interval", interval)


def test_the_count_covers_a_configured_queue_nobody_has_posted_to(make_queue, store_dirs):
    make_queue()
    assert not (store_dirs["items"] / "task.example.com").exists()  # no directory on disk yet
    assert "queues=1" in sweep()


# --- the loop's lines: SweepTally, with time as a parameter ---------------------------------

T0 = 1_751_500_000.0


def test_an_idle_pass_prints_nothing():
    tally = SweepTally(started=T0)
    for n in range(1, 50):
        assert tally.lines(SweepReport(queues=1), 1, T0 + 5 * n) == ([], [])


def test_a_pass_that_changed_something_prints_one_line_with_the_queue_count():
    tally = SweepTally(started=T0)
    out, err = tally.lines(SweepReport(queues=0, requeue=2, cleaned=1), 3, T0 + 5)
    assert out == ["2025-07-02T23:46:45Z 3 queues swept: requeue=2 cleaned=1"] and err == []


def test_a_summary_comes_at_most_every_five_minutes_with_the_totals():
    tally = SweepTally(started=T0)
    assert tally.lines(SweepReport(timeout=1), 1, T0 + 5)[0][-1].endswith("timeout=1")
    for n in range(2, 60):  # 295 s: no summary yet
        assert tally.lines(SweepReport(), 1, T0 + 5 * n) == ([], [])
    out, _ = tally.lines(SweepReport(), 1, T0 + 300)
    assert out == ["2025-07-02T23:51:40Z last 5 min: 60 passes over 1 queue: timeout=1"]
    assert tally.lines(SweepReport(), 1, T0 + 305) == ([], [])
    out, _ = tally.lines(SweepReport(), 1, T0 + 600)
    assert out[-1].endswith("last 5 min: 2 passes over 1 queue: nothing changed")


def test_a_skipped_pass_and_a_repeated_error_are_said_once():
    tally = SweepTally(started=T0)
    skipped = SweepReport(skipped=True)
    assert tally.lines(skipped, 1, T0 + 5)[0] == [
        "2025-07-02T23:46:45Z skipped: another sweep is running"
    ]
    assert tally.lines(skipped, 1, T0 + 10) == ([], [])
    assert tally.lines(SweepReport(), 1, T0 + 15)[0] == [
        "2025-07-02T23:46:55Z sweeping again: the other sweep is done"
    ]
    failing = SweepReport(errors=["h.example/q: disk full"])
    assert tally.lines(failing, 1, T0 + 20) == ([], ["h.example/q: disk full"])
    assert tally.lines(failing, 1, T0 + 25) == ([], [])  # the same error: said already
    assert tally.lines(SweepReport(), 1, T0 + 30) == ([], [])


# --- the loop as a process ------------------------------------------------------------------


@pytest.mark.slow
def test_the_loop_prints_changes_only_and_stops_on_ctrl_c_without_a_traceback(tmp_path):
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
    subprocess.run([*manage, "createqueue", "task.example.com", "resize", "--lease-seconds", "10"],
                   cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip
    store = QueueStore(StoreConfig(items_dir=tmp_path / "items", logs_dir=tmp_path / "logs",
                                   fsync=False))  # fmt: skip
    settings = QueueSettings(lease_seconds=10)
    store.post("task.example.com", "resize", {"n": 1}, settings=settings, posted_by="a")
    long_ago = int(time.time() * 1000) - 60_000  # its lease lapsed: the first pass requeues it
    store.claim("task.example.com", "resize", settings=settings, worker="w", now=long_ago)
    loop = subprocess.Popen([*manage, "sweep", "--loop", "--interval", "0.05"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        with reaped(loop):
            started = loop.stdout.readline()
            assert started.startswith("sweeping 1 configured queue every 0.05 s")
            changed = loop.stdout.readline()
            assert changed.endswith(" 1 queue swept: requeue=1\n")
            out, err = interrupted(loop)
    finally:
        store.close()
    assert loop.returncode == 0
    assert "Traceback" not in err and err == ""
    assert out == "sweep stopped\n"  # the idle passes since the requeue said nothing
