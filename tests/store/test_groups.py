"""Groups with a callback on both stores: a group is open until a post that gives onComplete
closes it, and once every member of a closed group has ended its callback task is posted
exactly once, its item carrying the group's outcome."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import time

import pytest

from queues.store import GroupClosed, InvalidRequest, NotFound, QueueFull, QueueSettings
from queues.store.batch import OnComplete, PostEntry, Report

from . import procs
from .conftest import HOST, QUEUE, T0

LONG = procs.LONG
W = {"settings": LONG, "worker": "box-1", "attempt": 1}
CALLBACKS = "reports"


def _on_complete(item=None, settings=LONG):
    return OnComplete(queue=CALLBACKS, item=item or {"report": "nightly"}, settings=settings)


def _post(h, n, group="g1", on_complete=None, now=T0):
    return h.post({"n": n}, settings=LONG, group=group, on_complete=on_complete, now=now)


def _run(h, task_id, now, outcome="result"):
    [claimed] = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=now)
    assert claimed.id == task_id
    if outcome == "result":
        h.store.finish(HOST, QUEUE, task_id, result={"ok": 1}, now=now + 1, **W)
    else:
        h.store.fail(HOST, QUEUE, task_id, result={"no": 1}, now=now + 1, **W)


def _callbacks(h):
    try:
        page = h.store.list_tasks(HOST, CALLBACKS, limit=50)
    except NotFound:
        return []
    return page.tasks


def test_a_closed_group_posts_its_callback_once_every_member_ended(h):
    a = _post(h, 1)
    b = _post(h, 2, on_complete=_on_complete())
    assert a.group == "g1" and a.status_view()["group"] == "g1"
    view = h.store.read_group(HOST, QUEUE, "g1").view()
    assert view["state"] == "closed" and view["posted"] == 2 and view["ended"] == 0
    assert view["onCompleteQueue"] == CALLBACKS and view["callback"] is None
    _run(h, a.id, T0 + 10)
    assert _callbacks(h) == []
    assert h.store.read_group(HOST, QUEUE, "g1").view()["counts"]["finished"] == 1
    _run(h, b.id, T0 + 20)
    [callback] = _callbacks(h)
    outcome = callback.item["group"]
    assert callback.item["report"] == "nightly" and callback.posted_by == "alice"
    assert outcome == {
        "id": "g1",
        "queue": QUEUE,
        "total": 2,
        "counts": {"finished": 2, "failed": 0, "cancelled": 0, "gone": 0},
        "unfinished": [],
        "unfinishedCount": 0,
    }
    assert [e["event"] for e in h.events(callback.id)] == ["posted", "callback"]
    view = h.store.read_group(HOST, QUEUE, "g1").view()
    assert view["state"] == "called_back" and view["running"] == 0
    assert view["callback"] == {"queue": CALLBACKS, "id": callback.id}
    # the sweep finds nothing to do, and posts nothing more
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 30)
    assert [t.id for t in _callbacks(h)] == [callback.id]


def test_an_open_group_never_calls_back_even_when_every_member_ended(h):
    a = _post(h, 1)
    _run(h, a.id, T0 + 10)
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 100_000)
    assert _callbacks(h) == []
    assert h.store.read_group(HOST, QUEUE, "g1").view()["state"] == "open"
    c = _post(h, 3, on_complete=_on_complete(), now=T0 + 200)  # closes it, as its last member
    assert _callbacks(h) == []
    _run(h, c.id, T0 + 300)
    [callback] = _callbacks(h)
    assert callback.item["group"]["total"] == 2


def test_a_closed_group_refuses_more_members_and_nothing_is_written(h):
    _post(h, 1, on_complete=_on_complete())
    before = h.store.read_group(HOST, QUEUE, "g1")
    with pytest.raises(GroupClosed):
        _post(h, 2)
    with pytest.raises(GroupClosed):
        h.store.post_many(HOST, QUEUE, [PostEntry(item={"n": 3})], settings=LONG,
                          posted_by="alice", now=T0, group="g1")  # fmt: skip
    assert h.store.read_group(HOST, QUEUE, "g1") == before
    assert h.count("pending") == 1
    _post(h, 4, group="g2")  # another group of the queue is its own


def test_members_that_did_not_finish_are_counted_and_named_once(h):
    settings = QueueSettings(queue_seconds=LONG.queue_seconds, lease_seconds=3600, max_attempts=1)
    a = h.post({"n": 1}, settings=settings, group="g1")
    b = h.post({"n": 2}, settings=settings, group="g1")
    c = h.post({"n": 3}, settings=settings, group="g1", on_complete=_on_complete())
    h.store.cancel(HOST, QUEUE, c.id, settings=settings, now=T0 + 5)
    _run(h, a.id, T0 + 10, outcome="fail")
    # a member retried after its ending counts as it first ended, once
    h.store.retry(HOST, QUEUE, a.id, settings=settings, now=T0 + 20)
    claimed = h.store.claim(HOST, QUEUE, settings=settings, worker="box-1", now=T0 + 30,
                            max_tasks=2)  # fmt: skip
    assert {t.id for t in claimed} == {a.id, b.id}
    for task in claimed:
        h.store.finish(HOST, QUEUE, task.id, result={}, now=T0 + 40,
                       settings=settings, worker="box-1", attempt=task.attempts)  # fmt: skip
    [callback] = _callbacks(h)
    outcome = callback.item["group"]
    assert outcome["counts"] == {"finished": 1, "failed": 1, "cancelled": 1, "gone": 0}
    assert outcome["unfinished"] == sorted([a.id, c.id]) and outcome["unfinishedCount"] == 2


def test_a_batch_post_gives_its_entries_a_group_and_closes_it(h):
    results = h.store.post_many(
        HOST,
        QUEUE,
        [PostEntry(item={"n": i}) for i in range(5)],
        settings=LONG,
        posted_by="alice",
        now=T0,
        group="batch-1",
        on_complete=_on_complete(),
    )
    assert {r.task.group for r in results} == {"batch-1"}
    view = h.store.read_group(HOST, QUEUE, "batch-1").view()
    assert view["state"] == "closed" and view["posted"] == 5
    claimed = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 10, max_tasks=5)
    for task in claimed:
        h.store.finish(HOST, QUEUE, task.id, result={}, now=T0 + 20, **W)
    [callback] = _callbacks(h)
    assert callback.item["group"]["counts"]["finished"] == 5


def test_a_replayed_closing_post_answers_its_first_task_and_adds_no_member(h):
    first = h.store.post(HOST, QUEUE, {"n": 1}, settings=LONG, posted_by="alice", now=T0,
                         idempotency_key="k1", group="g1", on_complete=_on_complete())  # fmt: skip
    again = h.store.post(HOST, QUEUE, {"n": 1}, settings=LONG, posted_by="alice", now=T0 + 5,
                         idempotency_key="k1", group="g1", on_complete=_on_complete())  # fmt: skip
    assert again.replayed and again.task.id == first.task.id
    assert h.store.read_group(HOST, QUEUE, "g1").view()["posted"] == 1
    _run(h, first.task.id, T0 + 10)
    assert len(_callbacks(h)) == 1


@pytest.mark.parametrize(
    "group", ["", "Upper", "a/b", "-lead", "x" * 65, "dots.in.it", 7, "caf\u00e9", "a\x00"]
)
def test_a_bad_group_name_is_refused_and_nothing_is_posted(h, group):
    with pytest.raises(InvalidRequest):
        _post(h, 1, group=group)
    assert h.count("pending") == 0


def test_on_complete_is_checked_before_anything_is_posted(h):
    with pytest.raises(InvalidRequest):
        _post(h, 1, group=None, on_complete=_on_complete())  # onComplete needs a group
    with pytest.raises(InvalidRequest):
        _post(h, 1, on_complete=OnComplete(queue="Bad Queue", item={}, settings=LONG))
    with pytest.raises(InvalidRequest):
        _post(h, 1, on_complete=OnComplete(queue=CALLBACKS, item=[1], settings=LONG))
    assert h.count("pending") == 0
    with pytest.raises(NotFound):
        h.store.read_group(HOST, QUEUE, "g1")


def test_a_group_is_its_first_producers_and_anothers_post_to_it_is_not_found(h):
    _post(h, 1)
    with pytest.raises(NotFound):
        h.post({"n": 2}, settings=LONG, group="g1", posted_by="bob")
    with pytest.raises(NotFound):
        h.post({"n": 3}, settings=LONG, group="g1", posted_by=None)  # a public post
    view = h.store.read_group(HOST, QUEUE, "g1").view()
    assert view["postedBy"] == "alice" and view["posted"] == 1
    assert h.count("pending") == 1


def test_a_group_read_for_a_producer_is_not_found_when_another_producer_posted_it(h):
    """seen_by: the producer's own groups and the public ones; another producer's answers as a
    group never posted to. Without it (ANY, an operator's read) every group."""
    _post(h, 1, group="alices")
    h.post({"n": 2}, settings=LONG, group="public", posted_by=None, now=T0)
    assert h.store.read_group(HOST, QUEUE, "alices", seen_by="alice").posted_by == "alice"
    assert h.store.read_group(HOST, QUEUE, "public", seen_by="bob").posted_by is None
    assert h.store.read_group(HOST, QUEUE, "public", seen_by=None).counts.posted == 1
    for seen_by in ("bob", None):
        with pytest.raises(NotFound):
            h.store.read_group(HOST, QUEUE, "alices", seen_by=seen_by)
    assert h.store.read_group(HOST, QUEUE, "alices").counts.posted == 1


def test_an_unknown_or_invalid_group_is_not_found(h):
    _post(h, 1)
    for group in ("g2", "../g1", "G1", ""):
        with pytest.raises(NotFound):
            h.store.read_group(HOST, QUEUE, group)
    with pytest.raises(NotFound):
        h.store.read_group(HOST, "otherqueue", "g1")


def _big_group(h, n, now):
    """A closed group of n members, all ended but the last one, which box-1 holds."""
    for start in range(0, n, 100):
        last = start + 100 >= n
        entries = [PostEntry(item={"n": i}) for i in range(start, min(n, start + 100))]
        h.store.post_many(HOST, QUEUE, entries, settings=LONG, posted_by="alice", now=now,
                          group="big", on_complete=_on_complete() if last else None)  # fmt: skip
    ended = 0
    while True:
        claimed = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=now, max_tasks=100)
        if ended + len(claimed) == n:
            held, claimed = claimed[-1], claimed[:-1]
        reports = [Report(task_id=t.id, attempt=1, outcome="result", result={}) for t in claimed]
        if reports:
            h.store.finish_many(HOST, QUEUE, reports, settings=LONG, worker="box-1", now=now)
        ended += len(claimed)
        if ended == n - 1:
            return held


def _one_callback(h, n):
    [callback] = _callbacks(h)
    assert callback.item["group"]["counts"]["finished"] == n
    view = h.store.read_group(HOST, QUEUE, "big").view()
    assert view["state"] == "called_back" and view["callback"]["id"] == callback.id
    assert view["ended"] == view["posted"] == n
    return callback


def _restore(current, snapshot):
    """Make the tree `current` what `snapshot` is again, copying back only what differs (by
    name, size and mtime): a restore costs what the last ending changed, not the group. With
    scandir's entries and string paths: a Path per file made each of the ~80 restores of a
    10,000-member group cost seconds."""
    _restore_dir(os.fspath(current), os.fspath(snapshot))


def _restore_dir(here, there):
    theirs = {entry.name: entry for entry in os.scandir(there)}
    ours = {entry.name: entry for entry in os.scandir(here)}
    for name, entry in ours.items():
        if name not in theirs:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    for name, was in theirs.items():
        path = os.path.join(here, name)
        if was.is_dir(follow_symlinks=False):
            if name not in ours:
                os.mkdir(path)
            _restore_dir(path, was.path)
            continue
        now = ours.get(name)
        before, after = was.stat(follow_symlinks=False), None
        if now is not None:
            after = now.stat(follow_symlinks=False)
        if after is None or (after.st_size, after.st_mtime_ns) != (
            before.st_size,
            before.st_mtime_ns,
        ):
            shutil.copy2(was.path, path, follow_symlinks=False)


@pytest.mark.files_only("the file store's disk calls are where the kill is put")
@pytest.mark.parametrize("n", [3, pytest.param(10_000, marks=pytest.mark.slow)])
def test_a_group_calls_back_once_whichever_step_its_last_ending_is_killed_at(tmp_path, n):
    from .conftest import Harness

    h = Harness(tmp_path / "store")
    now = int(time.time() * 1000)
    last = _big_group(h, n, now)
    assert _callbacks(h) == []
    h.close()
    snapshot = tmp_path / "snapshot"
    shutil.copytree(h.config.items_dir, snapshot, symlinks=True)
    ctx = mp.get_context("fork")
    called_by_sweep = 0
    for k in range(1, 80):
        _restore(h.config.items_dir, snapshot)
        h.reopen()
        child = ctx.Process(target=procs.finish_and_kill, args=(h.config, last.id, k))
        child.start()
        child.join(60)
        assert child.exitcode in (0, -signal.SIGKILL), (k, child.exitcode)
        h.reopen()
        finished = h.store.read(HOST, QUEUE, last.id).status.value == "finished"
        before_sweep = len(_callbacks(h))
        assert before_sweep <= 1, k
        h.store.sweep_queue(HOST, QUEUE, LONG, now=now + 1000)
        if finished:
            callback = _one_callback(h, n)
            called_by_sweep += before_sweep == 0
            h.store.sweep_queue(HOST, QUEUE, LONG, now=now + 2000)  # and after the recovery
            assert [t.id for t in _callbacks(h)] == [callback.id], k
        else:
            assert _callbacks(h) == [], k  # the ending did not happen: nor did the callback
        if child.exitcode == 0:
            break
    else:
        pytest.fail("the finish never completed")
    assert called_by_sweep >= 3, k  # kills fell between the ending and the callback
    h.close()


@pytest.mark.files_only("the file store's disk calls are where the kill is put")
def test_a_kill_between_the_ending_and_the_callback_is_posted_once_by_two_sweeps_at_once(tmp_path):
    from .conftest import Harness

    h = Harness(tmp_path)
    now = int(time.time() * 1000)
    last = _big_group(h, 5, now)
    ctx = mp.get_context("fork")
    # the finish's record, then its log line, then the group's marker: kill inside the group
    for k in range(1, 60):
        child = ctx.Process(target=procs.finish_and_kill, args=(h.config, last.id, k))
        child.start()
        child.join(60)
        if h.store.read(HOST, QUEUE, last.id).status.value == "finished":
            break
    assert child.exitcode == -signal.SIGKILL and _callbacks(h) == []
    h.close()
    h.reopen()
    spawn = mp.get_context("spawn")
    out, start = spawn.Queue(), spawn.Event()
    sweeps = [spawn.Process(target=procs.sweeper, args=(h.opener(), now + 1000, start, out))
              for _ in range(2)]  # fmt: skip
    for p in sweeps:
        p.start()
    start.set()
    assert [out.get(timeout=60) for _ in sweeps] == [None, None]
    for p in sweeps:
        p.join(30)
    _one_callback(h, 5)


def test_two_processes_ending_the_last_members_at_once_post_one_callback(h):
    now = int(time.time() * 1000)
    _post(h, 1, group="race", now=now)
    _post(h, 2, group="race", on_complete=_on_complete(), now=now)
    claimed = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=now, max_tasks=2)
    ctx = mp.get_context("spawn")
    out, start = ctx.Queue(), ctx.Event()
    enders = [
        ctx.Process(target=procs.finisher, args=(h.opener(), t.id, start, out)) for t in claimed
    ]
    for p in enders:
        p.start()
    start.set()
    assert [out.get(timeout=60) for _ in enders] == [None, None]
    for p in enders:
        p.join(30)
    [callback] = _callbacks(h)
    assert callback.item["group"]["counts"]["finished"] == 2


@pytest.mark.files_only("the file store's markers and count are files a power cut may leave")
def test_what_a_power_cut_may_leave_of_the_unsynced_bookkeeping_the_sweep_recounts(h):
    a, b = _post(h, 1), _post(h, 2)
    _run(h, a.id, T0 + 10, outcome="fail")
    _run(h, b.id, T0 + 20)
    group_dir = h.queue_dir / "groups" / "g1"
    (group_dir / "ended" / a.id).write_bytes(b"")  # its name made durable, not its content
    (group_dir / "ended" / b.id).unlink()  # not even its name
    (group_dir / "unfinished").unlink()
    (group_dir / "count").write_bytes(b"000000000000000\n")  # torn
    c = _post(h, 3, on_complete=_on_complete(), now=T0 + 30)  # recounts the torn count first
    _run(h, c.id, T0 + 40)
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 50)
    [callback] = _callbacks(h)
    outcome = callback.item["group"]
    assert outcome["counts"] == {"finished": 2, "failed": 1, "cancelled": 0, "gone": 0}
    assert outcome["unfinished"] == [a.id] and outcome["total"] == 3


def test_a_groups_members_read_in_post_order(h):
    posted = [_post(h, i, now=T0 + i) for i in range(3)]
    assert [t.id for t in h.store.group_members(HOST, QUEUE, "g1")] == [t.id for t in posted]
    assert len(h.store.group_members(HOST, QUEUE, "g1", limit=2)) == 2
    with pytest.raises(NotFound):
        h.store.group_members(HOST, QUEUE, "nosuch")


def _called_back(h, group="g1", now=T0):
    """A group of two members, closed and called back; its callback task."""
    a = _post(h, 1, group=group, now=now)
    b = _post(h, 2, group=group, on_complete=_on_complete(), now=now)
    _run(h, a.id, now + 10)
    _run(h, b.id, now + 20)
    [callback] = [t for t in _callbacks(h) if t.item["group"]["id"] == group]
    return callback


def _clean_callback(h, callback, now):
    """The callback task run, finished, and cleaned by its queue's retention."""
    [claimed] = h.store.claim(HOST, CALLBACKS, settings=LONG, worker="box-1", now=now)
    assert claimed.id == callback.id
    h.store.finish(HOST, CALLBACKS, callback.id, result={}, now=now + 1,
                   settings=LONG, worker="box-1", attempt=1)  # fmt: skip
    after = now + LONG.retain_seconds * 1000 + 2
    assert h.store.sweep_queue(HOST, CALLBACKS, LONG, now=after).cleaned == 1
    return after


def test_a_called_back_group_goes_with_its_callback_task(h):
    callback = _called_back(h)
    other = _called_back(h, group="g2")
    # its callback task still there, the group stays, however late
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 100 * 86_400_000)
    assert h.store.read_group(HOST, QUEUE, "g1").view()["state"] == "called_back"
    after = _clean_callback(h, callback, T0 + 1000)
    h.store.sweep_queue(HOST, QUEUE, LONG, now=after)
    with pytest.raises(NotFound):
        h.store.read_group(HOST, QUEUE, "g1")
    assert h.store.read_group(HOST, QUEUE, "g2").view()["callback"]["id"] == other.id
    # its members keep their records (their own retention) and the name is free again: a new
    # group, whose callback is its own (the old one's Idempotency-Key went with its task)
    again = _post(h, 3, group="g1", on_complete=_on_complete(), now=after)
    view = h.store.read_group(HOST, QUEUE, "g1").view()
    assert view["state"] == "closed" and view["posted"] == 1
    _run(h, again.id, after + 10)
    fresh = [t for t in _callbacks(h) if t.item["group"]["id"] == "g1"]
    assert [t.item["group"]["total"] for t in fresh] == [1] and fresh[0].id != callback.id


def test_a_group_whose_callback_task_was_deleted_goes_at_the_next_sweep(h):
    callback = _called_back(h)
    [claimed] = h.store.claim(HOST, CALLBACKS, settings=LONG, worker="box-1", now=T0 + 100)
    h.store.fail(HOST, CALLBACKS, claimed.id, result={}, now=T0 + 101, **W)
    h.store.delete(HOST, CALLBACKS, callback.id, now=T0 + 102)
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 103)
    with pytest.raises(NotFound):
        h.store.read_group(HOST, QUEUE, "g1")


@pytest.mark.files_only("a directory renamed aside: the PostgreSQL store deletes rows")
def test_what_a_crash_left_of_a_removal_is_deleted_at_the_next_sweep(h):
    _post(h, 1, group="g1")
    groups = h.queue_dir / "groups"
    aside = groups / ".gone-g0-0a1b2c3d"
    (aside / "members").mkdir(parents=True)
    (aside / "members" / "0123456789abcdef").write_bytes(b"")
    (aside / "count").write_bytes(b"x")
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 10)
    assert sorted(p.name for p in groups.iterdir()) == ["g1"]


def _blocked_in_flock(thread) -> bool:
    """Whether the thread is inside flock(2) now (x86-64's 73, aarch64's 32), read from /proc."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/syscall") as now:
            call = now.read().split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return call in ("73", "32")


@pytest.mark.files_only("the group's flock and its directory's name: PostgreSQL locks a row")
def test_a_post_that_waited_for_a_removed_groups_lock_makes_a_new_group(h):
    import fcntl
    import threading

    _called_back(h)
    gfd = os.open(h.queue_dir / "groups" / "g1", os.O_RDONLY | os.O_DIRECTORY)
    lock = os.open("count", os.O_RDWR, dir_fd=gfd)
    fcntl.flock(lock, fcntl.LOCK_EX)  # the sweep's lock, as it removes the group
    posted = []
    poster = threading.Thread(target=lambda: posted.append(_post(h, 9, group="g1", now=T0 + 50)))
    poster.start()
    deadline = time.monotonic() + 30
    while not _blocked_in_flock(poster):
        assert time.monotonic() < deadline, "the post never waited for the group's lock"
        time.sleep(0.01)
    groups = h.queue_dir / "groups"
    os.rename(groups / "g1", groups / ".gone-g1-00000000")  # the sweep's rename, under the lock
    os.close(lock)
    os.close(gfd)
    poster.join(timeout=30)
    # it joined no group that was going away (whose `closed` would have refused it): a new one
    assert posted and posted[0].group == "g1"
    view = h.store.read_group(HOST, QUEUE, "g1").view()
    assert view["state"] == "open" and view["posted"] == 1


def test_a_post_that_waited_for_a_removed_groups_row_makes_a_new_group(h):
    if h.kind != "postgres":
        pytest.skip("a group's row, locked: the file store's flock has its own test above")
    import threading

    import psycopg
    from psycopg import sql

    _called_back(h)
    # pg_stat_activity is read from a connection of its own: a transaction sees one snapshot
    with (
        psycopg.connect(h.config.dsn) as sweep,
        psycopg.connect(h.config.dsn, autocommit=True) as look,
    ):
        sweep.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(h.config.schema)))
        # the sweep's transaction (remove_called_back), its row locked as its DELETE does
        sweep.execute("SELECT 1 FROM th_groups WHERE grp = 'g1' FOR UPDATE")
        posted = []
        poster = threading.Thread(
            target=lambda: posted.append(_post(h, 9, group="g1", now=T0 + 50))
        )
        poster.start()
        deadline = time.monotonic() + 30
        while not look.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE %s",
            ("%th_groups%FOR UPDATE%",),
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the post never waited for the group's row"
            time.sleep(0.01)
        sweep.execute("DELETE FROM th_group_members WHERE grp = 'g1'")
        sweep.execute("DELETE FROM th_groups WHERE grp = 'g1'")
        sweep.commit()
    poster.join(timeout=30)
    assert posted and posted[0].group == "g1"
    view = h.store.read_group(HOST, QUEUE, "g1").view()
    assert view["state"] == "open" and view["posted"] == 1


@pytest.mark.files_only("the file store's disk calls are where the kill is put")
def test_a_group_removal_killed_at_any_step_is_finished_by_the_next_sweep(tmp_path):
    from .conftest import Harness

    h = Harness(tmp_path / "store")
    callback = _called_back(h)
    after = _clean_callback(h, callback, T0 + 1000)
    h.close()
    snapshot = tmp_path / "snapshot"
    shutil.copytree(h.config.items_dir, snapshot, symlinks=True)
    groups = h.config.items_dir / HOST / QUEUE / "groups"
    ctx = mp.get_context("fork")
    left_aside = 0
    for k in range(1, 60):
        _restore(h.config.items_dir, snapshot)
        child = ctx.Process(target=procs.sweep_and_kill, args=(h.config, after, k))
        child.start()
        child.join(60)
        assert child.exitcode in (0, -signal.SIGKILL), (k, child.exitcode)
        left_aside += any(p.name.startswith(".gone-") for p in groups.iterdir())
        h.reopen()
        h.store.sweep_queue(HOST, QUEUE, LONG, now=after)
        assert sorted(p.name for p in groups.iterdir()) == [], k  # gone, and no leftover
        with pytest.raises(NotFound):
            h.store.read_group(HOST, QUEUE, "g1")
        assert _callbacks(h) == [], k  # no second callback for the group that went
        h.close()
        if child.exitcode == 0:
            break
    else:
        pytest.fail("the sweep never ran to its end")
    assert left_aside >= 3  # kills fell inside the deletion of the renamed directory


@pytest.mark.files_only("a marker file written by hand: the PostgreSQL store keeps columns")
def test_a_group_whose_callback_marker_is_not_ours_stays_for_an_operator(h):
    callback = _called_back(h)
    marker = h.queue_dir / "groups" / "g1" / "callback"
    marker.write_bytes(b"{not json")
    after = _clean_callback(h, callback, T0 + 1000)
    report = h.store.sweep_queue(HOST, QUEUE, LONG, now=after)
    assert not report.errors
    assert marker.read_bytes() == b"{not json"  # not removed on a marker it cannot read


@pytest.mark.parametrize("batch", [False, True])
def test_a_closing_post_refused_for_room_leaves_the_group_open_and_its_retry_closes_it(h, batch):
    capped = QueueSettings(queue_seconds=LONG.queue_seconds, lease_seconds=3600, max_pending=2)
    a = h.post({"n": 1}, settings=capped, group="night")
    b = h.post({"n": 2}, settings=capped, group="night")

    def closing(now):
        if batch:
            [result] = h.store.post_many(
                HOST, QUEUE, [PostEntry(item={"n": 3}, idempotency_key="close-1")],
                settings=capped, posted_by="alice", now=now, group="night",
                on_complete=_on_complete(),
            )  # fmt: skip
            return result
        return h.store.post(HOST, QUEUE, {"n": 3}, settings=capped, posted_by="alice", now=now,
                            idempotency_key="close-1", group="night",
                            on_complete=_on_complete())  # fmt: skip

    with pytest.raises(QueueFull):
        closing(T0 + 1)
    view = h.store.read_group(HOST, QUEUE, "night").view()
    assert view["state"] == "open" and view["posted"] == 2 and view["onCompleteQueue"] is None
    _run(h, a.id, T0 + 10)
    _run(h, b.id, T0 + 20)
    h.store.sweep_queue(HOST, QUEUE, LONG, now=T0 + 30)
    assert _callbacks(h) == []  # an open group: the refused post closed nothing
    # room again: the retry with the same key is a new post, closes the group, and the
    # callback waits for its task
    again = closing(T0 + 40)
    assert not again.replayed
    view = h.store.read_group(HOST, QUEUE, "night").view()
    assert view["state"] == "closed" and view["posted"] == 3
    assert _callbacks(h) == []
    _run(h, again.task.id, T0 + 50)
    [callback] = _callbacks(h)
    assert callback.item["group"]["total"] == 3
    assert callback.item["group"]["counts"]["finished"] == 3


@pytest.mark.files_only("a closing post killed at each of its disk calls: PostgreSQL commits")
def test_a_closing_post_killed_at_any_step_closes_the_group_only_with_its_task(tmp_path):
    from .conftest import Harness

    ctx = mp.get_context("fork")
    left_closing = 0
    for k in range(1, 80):
        h = Harness(tmp_path / str(k))
        now = int(time.time() * 1000)  # the closing's age is its file's: the real clock
        member = h.post({"n": 1}, settings=LONG, group="g1", now=now)
        child = ctx.Process(target=procs.close_group_and_kill, args=(h.config, k))
        child.start()
        child.join(60)
        assert child.exitcode in (0, -signal.SIGKILL), (k, child.exitcode)
        h.reopen()
        left_closing += (h.queue_dir / "groups" / "g1" / "closing").exists()
        later = now + 61_000  # past the minute a closing post may take
        h.store.sweep_queue(HOST, QUEUE, LONG, now=later)
        closing = [t for t in h.store.list_tasks(HOST, QUEUE, limit=10).tasks if t.id != member.id]
        state = h.store.read_group(HOST, QUEUE, "g1").view()["state"]
        assert state == ("closed" if closing else "open"), k  # closed only with its task
        if not closing:  # a client's retry closes it
            closing = [h.post({"closing": 1}, settings=LONG, group="g1", now=later,
                              on_complete=_on_complete())]  # fmt: skip
        for task in [member, *closing]:
            _run(h, task.id, later + 10)
        [callback] = _callbacks(h)
        assert callback.item["group"]["counts"]["finished"] == 2, k
        h.close()
        if child.exitcode == 0:
            break
    else:
        pytest.fail("the closing post never ran to its end")
    assert left_closing >= 5  # kills fell while its tasks were written, before its close


@pytest.mark.files_only("posts made at an instant of another's: PostgreSQL serialises on a row")
def test_a_post_while_the_closing_post_writes_its_task_joins_and_a_second_closing_is_refused(h):
    from queues.store import files

    a = _post(h, 1)
    met: dict[str, object] = {}

    def between(_call, kind):
        # the closing post's task being written: its close not yet made
        if met or kind != "open" or not (h.queue_dir / "groups" / "g1" / "closing").exists():
            return
        met["in"] = True
        met["joined"] = _post(h, 2)  # the group is open yet: it joins
        with pytest.raises(GroupClosed):  # one close at a time
            _post(h, 3, on_complete=_on_complete(item={"report": "second"}))
        met["refused"] = True

    files.FAULTS.before = between
    try:
        c = _post(h, 4, on_complete=_on_complete())
    finally:
        files.FAULTS.reset()
    assert met.get("refused")
    view = h.store.read_group(HOST, QUEUE, "g1").view()
    assert view["state"] == "closed" and view["posted"] == 3
    claimed = h.store.claim(HOST, QUEUE, settings=LONG, worker="box-1", now=T0 + 10, max_tasks=5)
    assert {t.id for t in claimed} == {a.id, met["joined"].id, c.id}  # type: ignore[attr-defined]
    for task in claimed:
        h.store.finish(HOST, QUEUE, task.id, result={}, now=T0 + 20, **W)
    [callback] = _callbacks(h)
    assert callback.item["report"] == "nightly" and callback.item["group"]["total"] == 3


def test_a_queues_groups_are_listed_by_name(h):
    """Issue 36, item 7: the console's queue page lists its groups (a group was reachable only
    from a member or by its URL)."""
    for name in ("nightly", "a-batch", "z_last", "b-2"):
        _post(h, 1, group=name)
    h.post({"n": 0}, settings=LONG)  # no group
    assert h.store.group_names(HOST, QUEUE, limit=0) == []
    assert h.store.group_names(HOST, QUEUE) == ["a-batch", "b-2", "nightly", "z_last"]
    assert h.store.group_names(HOST, QUEUE, limit=2) == ["a-batch", "b-2"]
