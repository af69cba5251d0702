"""The sweep loop reads a done record once, not at every pass (queues/store/done_records.py),
and what it keeps never decides against the record on disk: a rewritten, corrupted or replaced
record, or retention settings changed between passes, count at the next pass."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from queues.store import sweep_queue
from queues.store.done_records import DoneRecords

from .conftest import HOST, QUEUE, SETTINGS, T0

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3_600_000
FETCHED = replace(SETTINGS, retain_from="fetched", max_retain_seconds=48 * 3600)


def finished(h, n: int, *, at: int = T0 + 1000) -> list[str]:
    """n tasks posted, claimed and finished at `at`; their done files made older than the
    moment a stamp trusts (stamps.RACY_NS), as any record is a pass or two after its write."""
    ids = []
    for i in range(n):
        task = h.post({"n": i}, now=at - 500)
        claimed = h.claim(now=at - 200)
        assert claimed is not None and claimed.id == task.id
        h.store.finish(HOST, QUEUE, task.id, settings=SETTINGS, worker="box-1", attempt=1,
                       result={"ok": i}, now=at)  # fmt: skip
        ids.append(task.id)
    for task_id in ids:
        aged(h.queue_dir / "done" / f"{task_id}.json")
    return ids


def aged(path: Path) -> None:
    past = time.time_ns() - 10 * 1_000_000_000
    os.utime(path, ns=(past, past), follow_symlinks=False)


_COUNT_OPENS = """
import sys
from pathlib import Path
from queues.store import QueueSettings, QueueStore, StoreConfig, sweep_queue

items, logs, host, queue, now = sys.argv[1:6]
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".json"):
        opened.append(args[0])
sys.addaudithook(hook)
store = QueueStore(StoreConfig(items_dir=Path(items), logs_dir=Path(logs), fsync=False))
for _ in range(3):
    opened.clear()
    sweep_queue(store, host, queue, QueueSettings(), now=int(now))
    print(len(opened))
"""


def test_a_sweep_loop_opens_each_unchanged_done_record_once(h):
    ids = finished(h, 12)
    h.close()
    argv = [sys.executable, "-c", _COUNT_OPENS, str(h.config.items_dir), str(h.config.logs_dir),
            HOST, QUEUE, str(T0 + 2000)]  # fmt: skip
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    # the first pass reads every record; the next ones, none: each is judged from what was kept
    assert [int(n) for n in out.stdout.split()] == [len(ids), 0, 0]


def test_a_record_rewritten_since_the_last_pass_is_judged_by_its_new_times(h):
    # unfetched, it is kept 48 hours; fetched, an hour after its fetch
    [task_id] = finished(h, 1)
    assert sweep_queue(h.store, HOST, QUEUE, FETCHED, now=T0 + 2 * HOUR).cleaned == 0
    h.store.fetch(HOST, QUEUE, task_id, now=T0 + 2 * HOUR)  # a new record, fetchedAt in it
    aged(h.queue_dir / "done" / f"{task_id}.json")
    assert sweep_queue(h.store, HOST, QUEUE, FETCHED, now=T0 + 3 * HOUR).cleaned == 1
    assert h.where(task_id) == []


def test_retention_shortened_between_two_passes_counts_at_the_second(h):
    [task_id] = finished(h, 1)
    week = replace(SETTINGS, retain_seconds=7 * 24 * 3600)
    assert sweep_queue(h.store, HOST, QUEUE, week, now=T0 + 2 * HOUR).cleaned == 0
    assert sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 2 * HOUR).cleaned == 1
    assert h.where(task_id) == []


def test_a_record_corrupted_by_hand_after_a_pass_is_quarantined_at_the_next(h):
    [task_id, other] = finished(h, 2)
    assert sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 2000).cleaned == 0
    path = h.queue_dir / "done" / f"{task_id}.json"
    path.write_bytes(b"{not json")  # in place: the same inode, a new size and mtime
    aged(path)
    report = sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 3000)
    assert report.quarantined == 1
    assert [p.read_bytes() for p in (h.queue_dir / "quarantine").iterdir()] == [b"{not json"]
    assert h.where(other) == ["done"]


def test_a_symlink_put_in_place_of_a_read_record_is_quarantined(h, tmp_path):
    [task_id] = finished(h, 1)
    assert sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 2000).cleaned == 0
    path = h.queue_dir / "done" / f"{task_id}.json"
    target = tmp_path / "outside.json"
    target.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(target)
    aged(path)
    report = sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 3000)
    assert report.quarantined == 1 and target.exists()


def test_a_record_moved_back_and_ended_again_is_read_again(h):
    task_id = h.post(now=T0).id
    assert h.claim(now=T0 + 500) is not None
    h.store.fail(HOST, QUEUE, task_id, settings=SETTINGS, worker="box-1", attempt=1,
                 result={"why": "first"}, now=T0 + 1000)  # fmt: skip
    aged(h.queue_dir / "done" / f"{task_id}.json")
    assert sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 2000).cleaned == 0
    h.store.retry(HOST, QUEUE, task_id, settings=SETTINGS, now=T0 + 3000)
    # the pass between forgets it (no longer in done/); its new ending is read afresh
    assert sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 4000).cleaned == 0
    again = h.claim(now=T0 + HOUR)
    assert again is not None and again.id == task_id
    h.store.finish(HOST, QUEUE, task_id, settings=SETTINGS, worker="box-1", attempt=2,
                   result={"again": True}, now=T0 + HOUR)  # fmt: skip
    aged(h.queue_dir / "done" / f"{task_id}.json")
    # an hour after the first ending: not the second one's
    assert sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + HOUR + 2000).cleaned == 0
    assert sweep_queue(h.store, HOST, QUEUE, SETTINGS, now=T0 + 2 * HOUR).cleaned == 1


def test_no_more_than_the_limit_is_kept_and_a_young_record_not_at_all(h):
    ids = finished(h, 3)
    young = finished(h, 1)[0]
    os.utime(h.queue_dir / "done" / f"{young}.json")  # written just now, as far as a stamp sees
    records = DoneRecords(limit=2)
    with h.store.queue_dirs(HOST, QUEUE) as qd:
        done_fd = qd.fd("done")
        for task_id in [*ids, young]:
            opened = os.stat(f"{task_id}.json", dir_fd=done_fd)
            records.learn(HOST, QUEUE, h.store.read(HOST, QUEUE, task_id), opened)
        kept = [t for t in [*ids, young]
                if records.not_due(done_fd, HOST, QUEUE, t, SETTINGS, T0 + 2000)]  # fmt: skip
        assert kept == ids[:2]
        # forgetting one makes room for another
        records.keep_only(HOST, QUEUE, {ids[1], ids[2]})
        third = os.stat(f"{ids[2]}.json", dir_fd=done_fd)
        records.learn(HOST, QUEUE, h.store.read(HOST, QUEUE, ids[2]), third)
        kept = [t for t in ids if records.not_due(done_fd, HOST, QUEUE, t, SETTINGS, T0 + 2000)]
        assert kept == ids[1:]


def test_what_is_kept_gives_back_both_times_and_no_fetch(h):
    """The kept times, one int a record, judge as the record would: unfetched (48 hours) and
    fetched (an hour after), at their edges."""
    fetched, unfetched = finished(h, 2)
    h.store.fetch(HOST, QUEUE, fetched, now=T0 + 5000)
    aged(h.queue_dir / "done" / f"{fetched}.json")
    records = DoneRecords()
    with h.store.queue_dirs(HOST, QUEUE) as qd:
        done_fd = qd.fd("done")
        for task_id in (fetched, unfetched):
            opened = os.stat(f"{task_id}.json", dir_fd=done_fd)
            records.learn(HOST, QUEUE, h.store.read(HOST, QUEUE, task_id), opened)

        def not_due(task_id: str, now: int) -> bool:
            return records.not_due(done_fd, HOST, QUEUE, task_id, FETCHED, now)

        assert not_due(fetched, T0 + 5000 + HOUR - 1) and not not_due(fetched, T0 + 5000 + HOUR)
        assert not_due(unfetched, T0 + 1000 + 48 * HOUR - 1)
        assert not not_due(unfetched, T0 + 1000 + 48 * HOUR)
