"""The sweep on hand-written files in the specification's exact format."""

from __future__ import annotations

import fcntl
import os
from dataclasses import replace

import orjson
import pytest

from queues.store import State, sweep_all, sweep_queue

from .conftest import HOST, QUEUE, SETTINGS, T0

HOUR = 3_600_000


def spec_record(task_id: str, status: str, **over):
    record = {
        "id": task_id,
        "host": HOST,
        "queue": QUEUE,
        "status": status,
        "item": {"url": "https://ex.com/a.png", "format": "jpg", "width": 800},
        "postedBy": "alice",
        "postedAt": T0,
        "updatedAt": T0,
        "attempts": 0,
        "lease": None,
        "progress": None,
        "result": None,
        "error": None,
        "finishedAt": None,
        "fetchedAt": None,
    }
    record.update(over)
    return record


def plant(h, directory: str, record: dict) -> None:
    """A record written by hand: a file in `directory`, or (postgres) a row, whose status
    must then be the directory's."""
    h.plant(directory, record)


COPIES = "two copies of one task in two directories: the PostgreSQL store has one row per task"


@pytest.fixture
def q(h):
    h.store.create_queue(HOST, QUEUE)
    return h


def test_old_pending_times_out(q):
    plant(q, "pending", spec_record("9f2c1a0b7d4e6f83", "pending"))
    plant(q, "pending", spec_record("9f2c1a0b7d4e6f84", "pending", postedAt=T0 + 10 * HOUR))
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 24 * HOUR + 1)
    assert report.timeout == 1
    assert q.on_disk("9f2c1a0b7d4e6f83")["done"]["error"] == "timeout"
    assert q.where("9f2c1a0b7d4e6f84") == ["pending"]


def test_lapsed_lease_requeues_and_live_lease_stays(q):
    lapsed = spec_record(
        "3a71bd0c5e2f9481",
        "processing",
        attempts=1,
        lease={"worker": "box-1", "until": T0 + 60_000},
    )
    live = spec_record(
        "3a71bd0c5e2f9482",
        "processing",
        attempts=1,
        lease={"worker": "box-2", "until": T0 + 120_000},
    )
    plant(q, "processing", lapsed)
    plant(q, "processing", live)
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 60_000)
    assert report.requeue == 1
    record = q.on_disk(lapsed["id"])["pending"]
    assert record["status"] == "pending" and record["lease"] is None and record["attempts"] == 1
    assert q.where(live["id"]) == ["processing"]
    assert q.events(lapsed["id"])[0]["event"] == "requeue"


def test_queue_timeout_beats_lease_timeout(q):
    plant(
        q,
        "processing",
        spec_record(
            "3a71bd0c5e2f9481",
            "processing",
            attempts=1,
            lease={"worker": "box-1", "until": T0 + 60_000},
        ),
    )
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 24 * HOUR + 1)
    assert (report.timeout, report.requeue) == (1, 0)
    assert q.on_disk("3a71bd0c5e2f9481")["done"]["error"] == "timeout"
    assert [e["event"] for e in q.events()] == ["timeout"]


def test_retention_from_finished(q):
    plant(q, "done", spec_record("18c4e05a9f2b7d63", "finished", finishedAt=T0, result={}))
    assert sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + HOUR - 1).cleaned == 0
    assert sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + HOUR).cleaned == 1
    assert q.where("18c4e05a9f2b7d63") == []
    [line] = q.events()
    assert line["event"] == "cleaned" and line["status"] == "finished"


def test_retention_from_fetched_and_max_retain(q):
    s = replace(SETTINGS, retain_from="fetched", max_retain_seconds=48 * 3600)
    plant(
        q,
        "done",
        spec_record("18c4e05a9f2b7d63", "finished", finishedAt=T0, fetchedAt=T0 + 5 * HOUR),
    )
    plant(q, "done", spec_record("18c4e05a9f2b7d64", "failed", finishedAt=T0))
    assert sweep_queue(q.store, HOST, QUEUE, s, now=T0 + 6 * HOUR - 1).cleaned == 0
    assert sweep_queue(q.store, HOST, QUEUE, s, now=T0 + 6 * HOUR).cleaned == 1
    assert q.where("18c4e05a9f2b7d63") == [] and q.where("18c4e05a9f2b7d64") == ["done"]
    assert sweep_queue(q.store, HOST, QUEUE, s, now=T0 + 48 * HOUR).cleaned == 1


@pytest.mark.files_only(COPIES)
def test_two_copies_highest_rev_wins_and_loser_deleted(q):
    # an interrupted finish: done (rev 4) written, processing (rev 3) not yet unlinked
    plant(
        q,
        "processing",
        spec_record(
            "3a71bd0c5e2f9481",
            "processing",
            rev=3,
            attempts=1,
            lease={"worker": "box-1", "until": T0 + 60_000},
        ),
    )
    plant(
        q,
        "done",
        spec_record(
            "3a71bd0c5e2f9481", "finished", rev=4, attempts=1, result={"ok": 1}, finishedAt=T0 + 1
        ),
    )
    assert q.store.read(HOST, QUEUE, "3a71bd0c5e2f9481").status is State.FINISHED
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 2 * 60_000)
    assert report.reconciled == 1 and report.requeue == 0
    assert q.where("3a71bd0c5e2f9481") == ["done"]


@pytest.mark.files_only(COPIES)
def test_claim_never_replaces_a_leftover_processing_copy(q):
    # an interrupted requeue: pending (rev 5) written, processing (rev 4) left behind
    leased = spec_record(
        "3a71bd0c5e2f9481", "processing", rev=4, attempts=1, lease={"worker": "box-1", "until": T0}
    )
    plant(q, "processing", leased)
    plant(q, "pending", spec_record("3a71bd0c5e2f9481", "pending", rev=5, attempts=1))
    before = (q.queue_dir / "processing" / "3a71bd0c5e2f9481.json").read_bytes()
    assert q.claim(now=T0 + 1) is None
    assert (q.queue_dir / "processing" / "3a71bd0c5e2f9481.json").read_bytes() == before
    sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 2)
    assert q.where("3a71bd0c5e2f9481") == ["pending"]
    assert q.claim(now=T0 + 3).attempts == 2


@pytest.mark.files_only(COPIES)
def test_claim_drops_a_pending_copy_older_than_done(q):
    # an interrupted cancel: done (rev 2) written, pending (rev 1) left behind
    plant(q, "pending", spec_record("9f2c1a0b7d4e6f83", "pending", rev=1))
    plant(q, "done", spec_record("9f2c1a0b7d4e6f83", "cancelled", rev=2, finishedAt=T0))
    assert q.claim(now=T0 + 1) is None
    assert q.where("9f2c1a0b7d4e6f83") == ["done"]


@pytest.mark.files_only("a claim interrupted between its rename and its rewrite: no rename here")
def test_interrupted_claim_is_requeued(q):
    # renamed into processing, crashed before the rewrite: status still "pending"
    plant(q, "processing", spec_record("9f2c1a0b7d4e6f83", "pending", rev=1))
    assert sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 1).requeue == 1
    assert q.where("9f2c1a0b7d4e6f83") == ["pending"]
    assert q.claim(now=T0 + 2).attempts == 1


@pytest.mark.files_only("a corrupt file: a row's record is written by the store in a transaction")
@pytest.mark.parametrize("content", [b"", b"{not json", b'{"id": 5}', b"[1]", b"\xff\xfe"])
def test_corrupt_file_is_quarantined_with_an_event(q, content):
    (q.queue_dir / "pending" / "9f2c1a0b7d4e6f83.json").write_bytes(content)
    good = q.post()
    assert [t.id for t in q.store.list_tasks(HOST, QUEUE).tasks] == [good.id]
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 1)
    assert report.quarantined == 1
    assert not (q.queue_dir / "pending" / "9f2c1a0b7d4e6f83.json").exists()
    assert [p.read_bytes() for p in (q.queue_dir / "quarantine").iterdir()] == [content]
    assert q.events("9f2c1a0b7d4e6f83")[0]["event"] == "quarantined"
    assert q.claim().id == good.id


@pytest.mark.files_only("a symlink among the task files: the PostgreSQL store has no files")
def test_symlinked_file_is_quarantined_never_followed(q, tmp_path):
    target = tmp_path / "outside.json"
    target.write_bytes(orjson.dumps(spec_record("9f2c1a0b7d4e6f83", "finished", finishedAt=0)))
    link = q.queue_dir / "done" / "9f2c1a0b7d4e6f83.json"
    link.symlink_to(target)
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 10 * HOUR)
    assert report.quarantined == 1 and report.cleaned == 0
    assert target.exists()  # the target outside the store is untouched
    [moved] = list((q.queue_dir / "quarantine").iterdir())
    assert moved.is_symlink()


@pytest.mark.files_only("temp files: a transaction leaves nothing half-written")
def test_stale_temp_files_removed_fresh_kept(q):
    stale = q.queue_dir / "pending" / ".tmp-0000"
    fresh = q.queue_dir / "done" / ".tmp-1111"
    stale.write_text("x")
    fresh.write_text("y")
    os.utime(stale, (T0 / 1000 - 120, T0 / 1000 - 120))
    os.utime(fresh, (T0 / 1000, T0 / 1000))
    assert sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0).temp_removed == 1
    assert not stale.exists() and fresh.exists()


@pytest.mark.files_only("sweep_all's lock file; PostgreSQL sweeps run side by side (test_pg_store)")
def test_one_sweep_at_a_time(q):
    fd = os.open(q.config.items_dir / ".sweep.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert sweep_all(q.store, lambda h, qu: SETTINGS, now=T0).skipped
    finally:
        os.close(fd)
    report = sweep_all(q.store, lambda h, qu: SETTINGS, now=T0)
    assert not report.skipped and report.queues == 1


@pytest.mark.files_only("sweep_all walks the queue directories and prunes day-files")
def test_sweep_all_skips_unknown_queues_and_prunes_logs(q):
    plant(q, "pending", spec_record("9f2c1a0b7d4e6f83", "pending"))
    old_day = q.config.logs_dir / "tasks" / "2020-01-01.jsonl"
    old_day.write_text("")
    report = sweep_all(q.store, lambda h, qu: None, now=T0 + 48 * HOUR)
    assert report.queues == 0 and q.where("9f2c1a0b7d4e6f83") == ["pending"]
    assert report.logs_pruned == 1 and not old_day.exists()


def test_restart_loses_nothing_and_keeps_leases(q):
    task = q.post()
    q.claim()
    q.reopen()
    assert q.store.read(HOST, QUEUE, task.id).status is State.PROCESSING
    store2 = type(q.store)(q.config)  # a second process's store beside the first
    assert store2.claim(HOST, QUEUE, settings=SETTINGS, worker="w", now=T0 + 2) == []
    store2.close()
