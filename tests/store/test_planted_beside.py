"""Things planted beside the state directories, where the store keeps files of its own: a FIFO,
a socket, a directory or a symlink as a task's waiters (dependents/), as a group or one of its
entries (groups/), as an Idempotency-Key (keys/), as post-seq or flow.json, among the spool's
files, or as a day-file; a file where a directory belongs.

Only regular files are the store's files: none of them may block, crash or stop a verb or a
sweep pass (the pass goes on with the rest of the queue: a lapsed lease is still taken back);
each is moved aside to quarantine/ and logged once (strays.py)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import stat
import tempfile
from pathlib import Path

import orjson
import pytest

from queues.store import QueueSettings, StorageUnavailable, paths, sweep_queue
from queues.store.batch import OnComplete

from .conftest import HOST, QUEUE, SETTINGS, T0
from .test_planted import KINDS, PLANTED, no_hang  # noqa: F401 (the fixture, autouse)

LEASE = QueueSettings(lease_seconds=60, queue_seconds=86400, retain_seconds=3600)
LAPSED = T0 + 120_000  # past the lease of a task claimed at T0 + 1000
NON_DIRS = ("fifo", "socket", "symlink", "file")  # what may be planted where a directory belongs


def _plant(path, kind):
    if kind == "file":
        path.write_bytes(b"planted\n")
    elif kind == "symlink":  # to a FIFO outside the store: following it would block
        target = Path(tempfile.mkdtemp()) / "fifo"
        os.mkfifo(target)
        path.symlink_to(target)
    else:
        KINDS[kind](path)


@pytest.fixture
def q(h):
    h.store.create_queue(HOST, QUEUE)
    return h


@pytest.fixture
def moved(caplog):
    """How many entries the store said it moved aside (strays.py's one warning each)."""
    caplog.set_level(logging.WARNING, logger="taskhoster.store")

    def count():
        said = [r for r in caplog.records if "moved aside" in r.getMessage()]
        caplog.clear()
        return len(said)

    return count


def _lapsed(q):
    """A claimed task whose lease lapses at LAPSED: the sweep must still take it back."""
    task = q.post({"lapse": 1}, settings=LEASE, priority=100)  # claimed before the others
    assert q.claim(settings=LEASE).id == task.id
    return task


def _aside(q, prefix):
    return [p.name for p in (q.queue_dir / "quarantine").iterdir() if p.name.startswith(prefix)]


def _sweeps_on(q, moved, prefix, lapsed):
    """A sweep pass: no error, the lapsed lease taken back, the planted entry moved aside and
    said once; a second pass says nothing more."""
    report = sweep_queue(q.store, HOST, QUEUE, LEASE, now=LAPSED)
    assert report.errors == [] and report.requeue == 1
    assert q.where(lapsed.id) == ["pending"]
    assert len(_aside(q, prefix)) == 1
    assert moved() == 1
    assert sweep_queue(q.store, HOST, QUEUE, LEASE, now=LAPSED + 1).errors == []
    assert moved() == 0


# -- dependents/ ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_planted_waiters_file_stops_no_sweep_and_is_moved_aside(q, moved, kind):
    ended = q.post({"n": 1})
    [claimed] = q.store.claim(HOST, QUEUE, settings=SETTINGS, worker="w", now=T0 + 1)
    q.store.finish(HOST, QUEUE, claimed.id, result={}, settings=SETTINGS, worker="w",
                   attempt=1, now=T0 + 2)  # fmt: skip
    _plant(q.queue_dir / "dependents" / f"{ended.id}.waiters", kind)  # an ended task's
    _plant(q.queue_dir / "dependents" / f"{PLANTED}.waiters", kind)  # one of no task
    lapsed = _lapsed(q)
    report = sweep_queue(q.store, HOST, QUEUE, LEASE, now=LAPSED)
    assert report.errors == [] and report.requeue == 1
    assert sorted(os.listdir(q.queue_dir / "dependents")) == []
    assert len(_aside(q, f"{ended.id}.waiters.dependents.")) == 1
    assert len(_aside(q, f"{PLANTED}.waiters.dependents.")) == 1
    assert moved() == 2
    assert q.where(lapsed.id) == ["pending"]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_post_after_a_task_whose_waiters_file_was_planted_neither_blocks_nor_fails(
    q, moved, kind
):
    a = q.post({"n": "a"})
    _plant(q.queue_dir / "dependents" / f"{a.id}.waiters", kind)
    b = q.post({"n": "b"}, after=[a.id])  # a FIFO would make its registration wait forever
    assert b.waiting_for == [f"{QUEUE}/{a.id}"] and moved() == 1
    [claimed] = q.store.claim(HOST, QUEUE, settings=SETTINGS, worker="w", now=T0 + 1)
    assert claimed.id == a.id
    q.store.finish(HOST, QUEUE, a.id, result={}, settings=SETTINGS, worker="w", attempt=1,
                   now=T0 + 2)  # fmt: skip
    assert q.store.read(HOST, QUEUE, b.id).waiting_for is None  # released by a's ending


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_ending_whose_waiters_file_was_planted_stands_and_moves_it_aside(q, moved, kind):
    a = q.post({"n": "a"})
    assert q.claim(now=T0 + 1, worker="w").id == a.id
    _plant(q.queue_dir / "dependents" / f"{a.id}.waiters", kind)
    q.store.finish(HOST, QUEUE, a.id, result={}, settings=SETTINGS, worker="w", attempt=1,
                   now=T0 + 2)  # fmt: skip
    assert q.where(a.id) == ["done"] and moved() == 1
    assert os.listdir(q.queue_dir / "dependents") == []


# -- groups/ -------------------------------------------------------------------------------------

CLOSING = OnComplete(queue="reports", item={"report": 1}, settings=QueueSettings())
# a group's entries, the kind each is: a regular file, or a directory
GROUP_FILES = ("count", "owner", "unfinished", "closed", "callback", "closing")
GROUP_DIRS = ("members", "ended")
GROUP_CASES = [(e, k) for e in GROUP_FILES for k in ("fifo", "directory", "symlink", "socket")]
GROUP_CASES += [(e, k) for e in GROUP_DIRS for k in NON_DIRS]


def _run_all(q, now):
    while claimed := q.store.claim(HOST, QUEUE, settings=SETTINGS, worker="w", now=now):
        for task in claimed:
            q.store.finish(HOST, QUEUE, task.id, result={}, settings=SETTINGS, worker="w",
                           attempt=task.attempts, now=now + 1)  # fmt: skip


def _replant(path, kind):
    """Plant in place of what is there (the store's own file or directory, or nothing)."""
    if path.is_dir() and not path.is_symlink():
        for inner in path.iterdir():
            inner.unlink()
        path.rmdir()
    elif os.path.lexists(path):
        path.unlink()
    _plant(path, kind)


@pytest.mark.parametrize(("entry", "kind"), GROUP_CASES)
def test_a_planted_entry_of_a_group_stops_nothing_and_is_moved_aside(q, moved, entry, kind):
    member = q.post({"n": 1}, group="g1")
    path = q.queue_dir / "groups" / "g1" / entry
    _replant(path, kind)
    # the group's page answers (it was a 500 for a FIFO count or a symlinked owner)
    view = q.store.read_group(HOST, QUEUE, "g1").view()
    assert view["state"] == "open" and view["postedBy"] == "alice"
    assert len(_aside(q, f"{entry}.groups-g1.")) == 1 and moved() == 1
    _replant(path, kind)  # again, for the sweep
    lapsed = _lapsed(q)
    report = sweep_queue(q.store, HOST, QUEUE, LEASE, now=LAPSED)
    assert report.errors == [] and report.requeue == 1
    assert q.where(lapsed.id) == ["pending"]
    assert len(_aside(q, f"{entry}.groups-g1.")) == 2 and moved() == 1
    # the group goes on: its owner's closing post closes it, and its callback comes once
    q.post({"n": 2}, group="g1", on_complete=CLOSING, now=LAPSED)
    _run_all(q, LAPSED + 10)
    [callback] = q.store.list_tasks(HOST, "reports").tasks
    # a members/ directory moved aside took the first member's registration with it
    assert callback.item["group"]["total"] == (1 if entry == "members" else 2)
    assert member.id in {t.id for t in q.store.list_tasks(HOST, QUEUE).tasks}


@pytest.mark.parametrize("kind", NON_DIRS)
def test_a_non_directory_planted_as_a_group_is_moved_aside_and_the_name_is_free(q, moved, kind):
    (q.queue_dir / "groups").mkdir()
    _plant(q.queue_dir / "groups" / "g2", kind)
    _plant(q.queue_dir / "groups" / ".gone-g3-0a1b2c3d", kind)
    lapsed = _lapsed(q)
    report = sweep_queue(q.store, HOST, QUEUE, LEASE, now=LAPSED)
    assert report.errors == [] and report.requeue == 1 and q.where(lapsed.id) == ["pending"]
    assert os.listdir(q.queue_dir / "groups") == [] and moved() == 2
    q.post({"n": 1}, group="g2", on_complete=CLOSING, now=LAPSED)
    assert q.store.read_group(HOST, QUEUE, "g2").view()["state"] == "closed"


@pytest.mark.parametrize("kind", NON_DIRS)
def test_a_post_to_a_group_planted_as_a_non_directory_makes_the_group(q, moved, kind):
    (q.queue_dir / "groups").mkdir()
    _plant(q.queue_dir / "groups" / "g2", kind)
    q.post({"n": 1}, group="g2")
    assert q.store.read_group(HOST, QUEUE, "g2").view()["posted"] == 1 and moved() == 1


@pytest.mark.parametrize("kind", NON_DIRS)
def test_a_non_directory_planted_as_groups_itself_is_moved_aside(q, moved, kind):
    _plant(q.queue_dir / "groups", kind)
    lapsed = _lapsed(q)
    report = sweep_queue(q.store, HOST, QUEUE, LEASE, now=LAPSED)
    assert report.errors == [] and q.where(lapsed.id) == ["pending"] and moved() == 1
    q.post({"n": 1}, group="g1")
    assert q.store.read_group(HOST, QUEUE, "g1").view()["posted"] == 1


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink"])
def test_a_planted_marker_among_a_groups_endings_is_moved_aside_and_recounted(q, moved, kind):
    a = q.post({"n": 1}, group="g1")
    q.post({"n": 2}, group="g1", on_complete=CLOSING)
    _run_all(q, T0 + 10)
    [callback] = q.store.list_tasks(HOST, "reports").tasks
    ended = q.queue_dir / "groups" / "g1" / "ended"
    (ended / a.id).unlink()  # as a power cut may leave it: the recount reads the member
    (q.queue_dir / "groups" / "g1" / "callback").unlink()
    (q.queue_dir / "groups" / "g1" / "count").write_bytes(b"torn")
    _plant(ended / a.id, kind)
    report = sweep_queue(q.store, HOST, QUEUE, LEASE, now=T0 + 20)
    assert report.errors == [] and moved() == 1
    # the recount marked it again from its record, and the callback is the same task
    assert (ended / a.id).read_bytes() == b"finished"
    assert [t.id for t in q.store.list_tasks(HOST, "reports").tasks] == [callback.id]


# -- keys/ ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_keyed_post_whose_key_name_was_planted_posts_and_moves_it_aside(q, moved, kind):
    name = paths.key_file("alice", "k1")
    _plant(q.queue_dir / "keys" / name, kind)
    first = q.store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="alice", now=T0,
                         idempotency_key="k1")  # fmt: skip
    assert not first.replayed and moved() == 1
    assert (q.queue_dir / "keys" / name).is_file()
    again = q.store.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="alice", now=T0,
                         idempotency_key="k1")  # fmt: skip
    assert again.replayed and again.task.id == first.task.id


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_planted_key_stops_no_sweep_and_no_retention(q, moved, kind):
    done = q.store.post(HOST, QUEUE, {"n": 1}, settings=LEASE, posted_by="alice", now=T0,
                        idempotency_key="k1").task  # fmt: skip
    assert q.claim(settings=LEASE, now=T0 + 1, worker="w").id == done.id
    q.store.finish(HOST, QUEUE, done.id, result={}, settings=LEASE, worker="w", attempt=1,
                   now=T0 + 2)  # fmt: skip
    key = q.queue_dir / "keys" / paths.key_file("alice", "k1")
    key.unlink()
    _plant(key, kind)  # where the cleaned task's key was
    _plant(q.queue_dir / "keys" / f"{'ab' * 16}.json", kind)  # under a key's name of no task
    (q.queue_dir / "keys" / "notes.txt").write_text("not ours")  # no key's name: left alone
    lapsed = _lapsed(q)
    report = sweep_queue(q.store, HOST, QUEUE, LEASE, now=T0 + 3_700_000)  # done's retention
    assert report.errors == [] and report.cleaned == 1 and report.requeue == 1
    assert q.where(done.id) == [] and q.where(lapsed.id) == ["pending"]
    assert sorted(os.listdir(q.queue_dir / "keys")) == ["notes.txt"] and moved() == 2


# -- post-seq, flow.json ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_planted_flow_file_is_moved_aside_and_the_claim_goes_on(q, moved, kind):
    limited = QueueSettings(max_processing=5)
    task = q.post({"n": 1}, settings=limited)
    _plant(q.queue_dir / "flow.json", kind)
    assert q.claim(settings=limited).id == task.id
    assert (q.queue_dir / "flow.json").is_file() and moved() == 1
    assert len(_aside(q, "flow.json.")) == 1


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_planted_post_sequence_is_moved_aside_and_the_post_goes_on(q, moved, kind):
    _plant(q.queue_dir / "post-seq", kind)
    q.post({"n": 1})
    assert (q.queue_dir / "post-seq").is_file() and moved() == 1
    assert len(_aside(q, "post-seq.")) == 1


# -- the spool and the day-files ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_planted_spool_entry_is_moved_aside_and_the_spool_drains(q, moved, kind):
    spool = q.config.items_dir / ".unlogged"
    spool.mkdir()
    task = q.post({"n": 1}, now=T0)
    line = orjson.dumps({"t": T0 // 1000, "at": T0, "event": "progress", "id": task.id,
                         "host": HOST, "queue": QUEUE})  # fmt: skip
    (spool / f"{T0 * 1_000_000:020d}-1-00000001.jsonl").write_bytes(line + b"\n")
    _plant(spool / f"{T0 * 1_000_000 - 1:020d}-1-00000000.jsonl", kind)  # drained first
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 1)
    assert report.errors == []
    q.store.core.log.drain_spool()
    assert sorted(os.listdir(spool)) == ["quarantine"] and moved() == 1
    assert q.event_names(task.id) == ["posted", "progress"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink"])
def test_a_planted_day_file_is_renamed_aside_and_the_lines_go_on(q, moved, kind):
    day = dt.datetime.fromtimestamp(T0 / 1000, dt.UTC).date()
    path = paths.day_file(q.config.logs_dir, day)
    path.parent.mkdir(parents=True, exist_ok=True)
    q.reopen()  # a day-file opened before would be the store's own
    _plant(path, kind)
    task = q.post({"n": 1}, now=T0)
    assert path.is_file() and not path.is_symlink() and moved() == 1
    assert q.event_names(task.id) == ["posted"]
    [aside] = [p for p in path.parent.iterdir() if p.name != path.name]
    assert aside.name.startswith(f"{path.name}.quarantined-")


def test_a_planted_entry_the_disk_will_not_move_is_a_503_not_a_hang(q, moved):
    """A FIFO as a task's waiters on a disk that refuses the move: the post is refused as the
    disk refuses it (StorageUnavailable), never left waiting for a writer."""
    from queues.store import files

    a = q.post({"n": "a"})
    os.mkfifo(q.queue_dir / "dependents" / f"{a.id}.waiters")
    files.FAULTS.reset()
    files.FAULTS.fail_kind, files.FAULTS.fail_at = "rename", 1  # the move aside
    try:
        with pytest.raises(StorageUnavailable):
            q.post({"n": "b"}, after=[a.id])
    finally:
        files.FAULTS.reset()
    assert moved() == 0


def test_an_entry_that_is_the_stores_own_kind_by_the_time_it_is_moved_stays(q, moved):
    """Between the open that met a planted entry and its move, another process may have moved
    it aside and made the store's own file there: that one is never moved."""
    from queues.store import strays

    dependents = q.queue_dir / "dependents"
    (dependents / f"{PLANTED}.waiters").write_bytes(b"\nresize/0123456789abcdef\n")
    (dependents / "members").mkdir()
    os.mkfifo(dependents / "fifo.waiters")
    with q.store.queue_dirs(HOST, QUEUE) as qd:
        fd = qd.fd("dependents")
        assert not strays.move_aside(qd, fd, f"{PLANTED}.waiters", "dependents")
        assert not strays.move_aside(qd, fd, "members", "dependents", wanted=stat.S_ISDIR)
        assert strays.move_aside(qd, fd, "fifo.waiters", "dependents")
        assert not strays.move_aside(qd, fd, "gone.waiters", "dependents")
    assert sorted(os.listdir(dependents)) == [f"{PLANTED}.waiters", "members"]
    assert moved() == 1
