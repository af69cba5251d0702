"""A long-lived sweep reads only what changed or fell due (queues/store/due_index.py), and every
rule still fires on time: for changes another process makes, for files changed by hand, and
after inotify lost events (a whole pass again)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from queues.store import QueueSettings, State, Task, sweep_queue
from queues.store.records import Lease
from queues.store.rules import next_due, verdict
from queues.store.sweep import SweepReport

from .conftest import HOST, QUEUE, T0, Harness

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3_600_000
S = QueueSettings(queue_seconds=3600, lease_seconds=600, retain_seconds=2 * 3600)


@pytest.fixture
def hf(tmp_path: Path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def whole_passes(h: Harness) -> int:
    with h.store.queue_dirs(HOST, QUEUE) as qd:
        return h.store.core.due.of(qd).whole_passes


def in_another_process(h: Harness, code: str) -> str:
    """Run `code` in a fresh interpreter with `store` open on the same directories (and HOST,
    QUEUE, S, T0 defined); its stdout."""
    prelude = (
        "import sys, orjson\nfrom pathlib import Path\n"
        "from queues.store import QueueSettings, QueueStore, StoreConfig\n"
        f"HOST, QUEUE, T0 = {HOST!r}, {QUEUE!r}, {T0}\n"
        "S = QueueSettings(queue_seconds=3600, lease_seconds=600, retain_seconds=2 * 3600)\n"
        f"store = QueueStore(StoreConfig(items_dir=Path({str(h.config.items_dir)!r}), "
        f"logs_dir=Path({str(h.config.logs_dir)!r}), fsync=False))\n"
    )
    done = subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def aged(path: Path) -> None:
    past = time.time_ns() - 10 * 1_000_000_000
    os.utime(path, ns=(past, past), follow_symlinks=False)


def swept_done_record(h: Harness) -> Path:
    """A task finished at T0 + 2000, its record old enough to be trusted, and one pass made."""
    task = h.post(settings=S, now=T0)
    assert h.claim(settings=S, now=T0 + 1000) is not None
    h.store.finish(HOST, QUEUE, task.id, settings=S, worker="box-1", attempt=1, result={},
                   now=T0 + 2000)  # fmt: skip
    path = h.queue_dir / "done" / f"{task.id}.json"
    aged(path)
    assert sweep_queue(h.store, HOST, QUEUE, S, now=T0 + 3000).cleaned == 0
    return path


# -- the rules' due times ---------------------------------------------------------------------


def _records() -> list[tuple[str, Task]]:
    base = Task(id="00000000000000aa", host=HOST, queue=QUEUE, status=State.PENDING,
                item={}, posted_by=None, posted_at=T0, updated_at=T0)  # fmt: skip
    leased = replace(base, status=State.PROCESSING, attempts=1, updated_at=T0 + 10,
                     lease=Lease(worker="w", until=T0 + 600_000))  # fmt: skip
    ended = replace(base, status=State.FINISHED, attempts=1, updated_at=T0 + 20,
                    finished_at=T0 + 20, result={})  # fmt: skip
    return [
        ("pending", base),
        ("pending", replace(base, requeued_at=T0 + 5000, attempts=1)),
        ("pending", replace(base, available_at=T0 + 10 * HOUR)),  # delayed past its window
        ("processing", leased),
        ("processing", replace(leased, lease=Lease(worker="w", until=T0 + 2 * HOUR))),
        ("processing", replace(leased, lease=None)),  # stranded: due at once
        ("processing", base),  # an interrupted claim: due at once
        ("pending", leased),  # a leased record carried back: due at once
        ("done", ended),
        ("done", replace(ended, fetched_at=T0 + HOUR)),
    ]


@pytest.mark.parametrize("retain_from", ["finished", "fetched"])
def test_next_due_is_the_first_moment_verdict_says_anything(retain_from):
    settings = replace(S, retain_from=retain_from, max_retain_seconds=5 * 3600)
    for directory, task in _records():
        due = next_due(directory, task, settings)
        assert due is not None, (directory, task)
        if due == -1:
            assert verdict(directory, task, settings, T0) is not None
            continue
        assert verdict(directory, task, settings, due - 1) is None, (directory, task)
        assert verdict(directory, task, settings, due) is not None, (directory, task)


def test_a_waiting_task_is_never_due_by_itself():
    task = replace(_records()[0][1], waiting_for=["00000000000000bb"])
    assert next_due("pending", task, S) is None
    assert verdict("pending", task, S, T0 + 100 * HOUR) is None


# -- a long-lived sweep -------------------------------------------------------------------------


def test_another_process_s_posts_claims_and_endings_are_judged_on_time(hf):
    hf.store.create_queue(HOST, QUEUE)
    assert (
        sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 1000).counts()
        == SweepReport(queues=1).counts()
    )
    ids = orjson.loads(
        in_another_process(
            hf,
            "posted = [store.post(HOST, QUEUE, {'n': i}, settings=S, posted_by=None,"
            " now=T0 + 2000).task.id"
            " for i in range(3)]\n"
            "leased, ended = store.claim(HOST, QUEUE, settings=S, worker='w', now=T0 + 3000,"
            " max_tasks=2)\n"
            "store.finish(HOST, QUEUE, ended.id, settings=S, worker='w', attempt=1, result={},"
            " now=T0 + 4000)\n"
            "print(orjson.dumps({'leased': leased.id, 'ended': ended.id,"
            " 'left': posted[2]}).decode())\n",
        )
    )
    for name in ("leased", "ended", "left"):
        aged(next(hf.queue_dir.glob(f"*/{ids[name]}.json")))
    # the claim's lease (10 minutes) ends first, then the queue timeout of the task left
    # pending, then the retention of the ended one
    lease_ends = T0 + 3000 + 600_000
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=lease_ends - 1).requeue == 0
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=lease_ends).requeue == 1
    assert hf.where(ids["leased"]) == ["pending"]
    window_ends = T0 + 2000 + HOUR
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=window_ends).timeout == 0
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=window_ends + 1).timeout >= 1
    assert hf.on_disk(ids["left"])["done"]["error"] == "timeout"
    retention_ends = T0 + 4000 + 2 * HOUR
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=retention_ends - 1).cleaned == 0
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=retention_ends).cleaned == 1
    assert hf.where(ids["ended"]) == []
    assert whole_passes(hf) == 1  # every pass after the first followed the changes


def test_a_lease_shortened_by_hand_in_place_is_judged_at_its_new_end(hf):
    task = hf.post(settings=S, now=T0)
    assert hf.claim(settings=S, now=T0 + 1000) is not None
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 2000).requeue == 0
    path = hf.queue_dir / "processing" / f"{task.id}.json"
    record = orjson.loads(path.read_bytes())
    record["lease"]["until"] = T0 + 5000
    with open(path, "r+b") as same_inode:  # written in place, as an editor may
        same_inode.truncate(0)
        same_inode.write(orjson.dumps(record))
    aged(path)
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 5000).requeue == 1
    assert hf.where(task.id) == ["pending"]


def test_a_record_rewritten_in_place_with_its_old_size_and_mtime_is_read_again(hf):
    """What a stamp (inode, mtime, size) cannot tell, an event on its name does."""
    path = swept_done_record(hf)
    before = os.stat(path)
    data = path.read_bytes()
    # the same length: T0 + 2000 becomes another 13-digit time, two hours earlier
    edited = data.replace(str(T0 + 2000).encode(), str(T0 + 2000 - 2 * HOUR).encode())
    assert len(edited) == len(data) and edited != data
    with open(path, "r+b") as same_inode:
        same_inode.write(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(path).st_ino, os.stat(path).st_mtime_ns) == (before.st_ino,
                                                                  before.st_mtime_ns)  # fmt: skip
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 4000).cleaned == 1


def test_a_temp_left_by_a_dead_writer_in_another_process_goes_once_stale(hf):
    hf.post(settings=S, now=T0)
    now = time.time_ns() // 1_000_000
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=now).temp_removed == 0
    in_another_process(
        hf,
        "import os\n"
        f"open({str(hf.queue_dir / 'pending' / '.tmp-dead')!r}, 'wb').write(b'half')\n"
        f"open({str(hf.queue_dir / 'keys' / '.tmp-dead')!r}, 'wb').write(b'half')\n",
    )
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=now + 1000).temp_removed == 0
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=now + 1000).temp_removed == 0
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=now + 62_000).temp_removed == 2
    assert hf.temp_files() == []
    assert whole_passes(hf) == 1


def test_a_key_whose_task_was_deleted_by_hand_goes(hf):
    now = time.time_ns() // 1_000_000
    task = hf.store.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="alice",
                         idempotency_key="k-1", now=now).task  # fmt: skip
    assert hf.keys() == 1
    later = now + 120_000  # the key is old enough to be judged
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=later).keys_removed == 0
    (hf.queue_dir / "pending" / f"{task.id}.json").unlink()  # by hand
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=later + 1000).keys_removed == 1
    assert hf.keys() == 0
    assert whole_passes(hf) == 1


def test_a_new_key_without_its_task_goes_once_stale(hf):
    hf.post(settings=S, now=T0)
    now = time.time_ns() // 1_000_000
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=now).keys_removed == 0
    # a keyed post that crashed between its key and its task, in another process
    key = hf.store.post(HOST, QUEUE, {"n": 2}, settings=S, posted_by="alice",
                        idempotency_key="k-2", now=now)  # fmt: skip
    (hf.queue_dir / "pending" / f"{key.task.id}.json").unlink()
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=now + 1000).keys_removed == 0
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=now + 62_000).keys_removed == 1


def test_lost_events_make_the_next_pass_a_whole_one(hf):
    """Past the kernel's queue (fs.inotify.max_queued_events), inotify drops events and says
    IN_Q_OVERFLOW: a change made after that is seen only by listing again."""
    path = swept_done_record(hf)
    queued = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    in_another_process(
        hf,
        "import os\n"
        f"done = {str(hf.queue_dir / 'done')!r}\n"
        f"for _ in range({queued // 2 + 100}):\n"
        "    open(os.path.join(done, 'noise'), 'wb').close()\n"
        "    os.unlink(os.path.join(done, 'noise'))\n"
        # then, its event lost, the record edited in place: ended two hours earlier
        f"path = {str(path)!r}\n"
        "data = open(path, 'rb').read()\n"
        f"open(path, 'r+b').write(data.replace(b'{T0 + 2000}', b'{T0 + 2000 - 2 * HOUR}'))\n",
    )
    aged(path)
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 4000).cleaned == 1
    assert whole_passes(hf) == 2


def test_new_settings_make_the_next_pass_a_whole_one(hf):
    hf.post(settings=S, now=T0)
    sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 1000)
    sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 2000)
    assert whole_passes(hf) == 1
    sweep_queue(hf.store, HOST, QUEUE, replace(S, queue_seconds=60), now=T0 + 3000)
    assert whole_passes(hf) == 2


def test_a_forked_sweep_passes_whole(hf):
    """A forked child's inherited inotify instance is not its own: it lists."""
    hf.post(settings=S, now=T0)
    sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 1000)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child reports by its exit code)
        try:
            timed_out = sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + HOUR + 1).timeout
            os._exit(0 if timed_out == 1 and whole_passes(hf) == 2 else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_sweep_s_watches_do_not_reach_the_counts_of_the_same_process(hf):
    """The sweep watches writes in place; a close after an unlink then names a gone file. On
    the claims' inotify instance (one mask per directory) that would count it in done/."""
    swept_done_record(hf)
    assert hf.store.stats(HOST, QUEUE, now=T0 + 3000).done == 1
    gone = hf.queue_dir / "done" / "00000000000000ff.json"
    with open(gone, "wb") as held_open:
        held_open.write(b"{}")
        gone.unlink()
    assert hf.store.stats(HOST, QUEUE, now=T0 + 3000).done == 1


def test_two_done_records_exchanged_in_place_are_each_judged_again(hf):
    """renameat2(RENAME_EXCHANGE), as another process may do it: each inode comes back under
    the other's name, with no name created or removed. Each name holds another id's record
    now, which the sweep quarantines."""
    first = swept_done_record(hf)
    second = swept_done_record(hf)
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.skip("no renameat2 in this C library")
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
    done = libc.renameat2(at_cwd, bytes(first), at_cwd, bytes(second), exchange)
    if done != 0:
        pytest.skip(f"RENAME_EXCHANGE refused here: {os.strerror(ctypes.get_errno())}")
    assert sweep_queue(hf.store, HOST, QUEUE, S, now=T0 + 4000).quarantined == 2
    assert whole_passes(hf) == 1
