"""inotify in a process: two instances however many wait (the threaded watcher and the indexes'
change log), each waiter woken only by its own directories (a waiting claim by task files
arriving in its queue's pending/, an event stream by day-file appends), and a directory watched
only while someone waits on it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from queues.store import QueueSettings, QueueStore, claiming, files, inotify
from queues.store.inotify import (
    APPENDS,
    ARRIVALS,
    ENTRIES,
    IN_CREATE,
    POLL_SECONDS,
    Channel,
    arrivals,
    changes,
    watcher,
)

from .conftest import HOST, QUEUE, SETTINGS, T0

# inotify instances, channels and watched directories are the file store's; the PostgreSQL
# store's waits (one LISTEN connection per store) are tested in test_pg_waiting.py
pytestmark = pytest.mark.files_only("inotify: the file store's way of waking waiters")

OTHER = "thumbs"  # a second queue on the same host
ROOT = Path(__file__).resolve().parents[2]


def _inotify_fds() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
    return count


def _moves(channel: Channel, generation: int, seconds: float = 2.0) -> bool:
    channel.wait(generation, seconds)
    return channel.generation != generation


def _wait_claim_in_thread(h, queue: str, seconds: float) -> tuple[threading.Thread, list]:
    got: list = []

    def run() -> None:
        tasks = h.store.wait_claim(HOST, queue, settings=SETTINGS, worker="w", wait_seconds=seconds)
        got.append((time.time(), tasks))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def _post_from_another_process(h, queue: str) -> float:
    """Post one task from a fresh interpreter; the wall-clock time its post returned."""
    code = (
        "import sys, time; from pathlib import Path\n"
        "from queues.store import QueueSettings, QueueStore, StoreConfig\n"
        "s = QueueStore(StoreConfig(items_dir=Path(sys.argv[1]), logs_dir=Path(sys.argv[2]),"
        " fsync=False))\n"
        "s.post(sys.argv[3], sys.argv[4], {'n': 1}, settings=QueueSettings(), posted_by='x')\n"
        "print(time.time())\n"
    )
    args = [str(h.config.items_dir), str(h.config.logs_dir), HOST, queue]
    out = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, check=True, text=True
    )
    return float(out.stdout)


def test_two_inotify_instances_serve_claims_streams_and_indexes(h):
    h.post(now=T0)
    h.claim(now=T0 + 1)  # builds the pending index, subscribed to pending/
    thread, _ = _wait_claim_in_thread(h, QUEUE, 1.0)  # a waiting claim, blocked now
    day_dir = h.config.logs_dir / "tasks"
    stream = watcher().channel([str(day_dir)], APPENDS)  # what an event stream waits on
    reader = threading.Thread(target=stream.wait, args=(stream.generation, 1.0), daemon=True)
    reader.start()
    time.sleep(0.1)
    assert thread.is_alive() and reader.is_alive()
    with h.store.queue_dirs(HOST, QUEUE) as qd, h.store.core.lock:
        assert stream.listening and h.store.core.index(qd)._sub is not None
    # the watcher and the change log, however many wait (and the sweep's own, in a test
    # process that swept before: inotify.sweep_changes)
    swept = inotify._sweep_changes is not None
    assert _inotify_fds() == 2 + swept
    thread.join()
    reader.join()


def test_a_waiting_claim_sleeps_through_other_queues_and_the_log_then_wakes_on_its_own(
    h, monkeypatch
):
    h.store.create_queue(HOST, OTHER)
    calls = []
    claim = claiming.claim
    monkeypatch.setattr(claiming, "claim", lambda *a, **kw: calls.append(1) or claim(*a, **kw))
    thread, got = _wait_claim_in_thread(h, QUEUE, 10.0)
    time.sleep(0.1)
    assert len(calls) == 2  # a look, a second one once watched; both found nothing: it sleeps
    # Posts to another queue (each also appends to the event log) and appends of its own.
    log = watcher().channel([str(h.config.logs_dir / "tasks")], APPENDS)
    for n in range(5):
        seen = log.generation
        h.store.post(HOST, OTHER, {"n": n}, settings=QueueSettings(), posted_by="a")
        assert _moves(log, seen)  # the events were read, and handed to the log's channel only
    time.sleep(0.1)
    assert len(calls) == 2 and thread.is_alive()
    posted_at = _post_from_another_process(h, QUEUE)
    thread.join(2.0)
    woke_at, tasks = got[0]
    # woken once: by the task file's rename into pending/, not by its temp file's creation
    assert len(tasks) == 1 and len(calls) == 3
    # Woken by inotify: milliseconds on an idle machine; the bound leaves room for a loaded one
    # (a polling waiter would have shown as more calls above, and the timeout is 10 s).
    assert woke_at - posted_at < 0.5


def test_a_queue_channel_does_not_move_for_another_queue_or_the_log(h):
    with h.store.queue_dirs(HOST, QUEUE, create=True) as a:
        channel_a = watcher().channel([a.proc_path("pending")], ENTRIES)
    with h.store.queue_dirs(HOST, OTHER, create=True) as b:
        channel_b = watcher().channel([b.proc_path("pending")], ENTRIES)
    log = watcher().channel([str(h.config.logs_dir / "tasks")], APPENDS)
    before_a, before_b, before_log = channel_a.generation, channel_b.generation, log.generation
    h.store.post(HOST, OTHER, {"n": 1}, settings=QueueSettings(), posted_by="a")
    assert _moves(channel_b, before_b) and _moves(log, before_log)
    time.sleep(0.05)
    assert channel_a.generation == before_a
    h.post(now=T0)
    assert _moves(channel_a, before_a)


def test_the_log_channel_wakes_on_an_append_to_an_existing_day_file(tmp_path):
    day_file = tmp_path / "2025-07-01.jsonl"
    day_file.write_bytes(b'{"n":1}\n')
    appends = watcher().channel([str(tmp_path)], APPENDS)
    # A second caller on the same directory with another mask: without IN_MASK_ADD its watch
    # would replace the first one's mask, and appends would stop waking the first channel.
    entries = watcher().channel([str(tmp_path)], ENTRIES)
    before, entries_before = appends.generation, entries.generation
    threading.Timer(0.05, lambda: day_file.open("ab").write(b'{"n":2}\n')).start()
    started = time.monotonic()
    assert _moves(appends, before)
    assert time.monotonic() - started < 1.0
    assert entries.generation == entries_before  # an append is no entry coming or going
    (tmp_path / "2025-07-02.jsonl").write_bytes(b"")
    assert _moves(entries, entries_before)


def test_without_inotify_a_channel_polls_cheaply():
    channel = Channel(threading.Lock(), ENTRIES, watched=False)
    started = time.monotonic()
    channel.wait(channel.generation, 10.0)
    assert time.monotonic() - started < POLL_SECONDS + 0.5
    assert not channel.listening


def test_a_directory_that_cannot_be_watched_gives_a_polling_channel(tmp_path):
    channel = watcher().channel([str(tmp_path / "missing")], ENTRIES)
    assert not channel.listening
    assert changes().subscribe(str(tmp_path / "missing")) is None


def _in_child(store, items: str, out) -> None:
    channel = watcher().channel([items], ENTRIES)  # the child's own watcher, made now
    # Another process's post: the inherited index hears nothing of it (no reader thread crossed
    # the fork), so it must fall back to listing the directory.
    other = QueueStore(store.config)
    other.post(HOST, QUEUE, {"n": 1}, settings=SETTINGS, posted_by="a")
    out.put(
        (
            _inotify_fds(),
            channel.listening,
            len(store.claim(HOST, QUEUE, settings=SETTINGS, worker="c")),
        )
    )


def test_a_forked_child_keeps_one_instance_and_its_inherited_store_still_claims(h):
    import multiprocessing as mp

    h.claim(now=T0)  # the parent's index and watcher exist before the fork
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_in_child, args=(h.store, str(h.config.items_dir), out))
    child.start()
    fds, listening, claimed = out.get(timeout=10)
    child.join(10)
    assert (fds, listening, claimed) == (1, True, 1)
    h.post(now=T0 + 1)  # and the parent's own watcher still serves the parent
    assert h.claim(now=T0 + 2) is not None


def test_a_directory_is_watched_only_while_a_channel_on_it_is_open(h):
    h.store.create_queue(HOST, QUEUE)
    before = watcher().watched_directories()
    thread, got = _wait_claim_in_thread(h, QUEUE, 0.3)
    time.sleep(0.1)
    assert watcher().watched_directories() == before + 1  # pending/, while the claim waits
    thread.join(2.0)
    assert got and got[0][1] == []
    assert watcher().watched_directories() == before  # the wait ended: the watch went with it
    with h.store.queue_dirs(HOST, QUEUE) as qd:
        channel = watcher().channel([qd.proc_path("pending")], ARRIVALS)
    with channel:
        assert watcher().watched_directories() == before + 1
        seen = channel.generation
        h.post(now=T0)
        assert _moves(channel, seen)
    assert watcher().watched_directories() == before


def test_a_dropped_channel_stops_costing_events_at_its_next_one(tmp_path):
    channel = watcher().channel([str(tmp_path)], ENTRIES)
    before = watcher().watched_directories()
    del channel  # never closed: the reader finds the watch orphaned and removes it
    (tmp_path / "x.json").write_bytes(b"{}")
    deadline = time.monotonic() + 2
    while watcher().watched_directories() == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watcher().watched_directories() == before - 1


def test_the_change_log_has_no_thread_and_keeps_events_until_an_index_drains(tmp_path):
    threads = threading.active_count()
    sub = changes().subscribe(str(tmp_path))
    assert sub is not None and threading.active_count() == threads
    sub.drain()
    (tmp_path / "a.json").write_bytes(b"{}")
    os.rename(tmp_path / "a.json", tmp_path / "b.json")
    time.sleep(0.05)
    assert sub.names == {}  # nothing has read the instance yet
    assert sub.drain() == (False, {"a.json": False, "b.json": True})


def test_a_waiting_claim_listens_for_creates_where_names_are_made_by_link(monkeypatch):
    assert files.creates_by_link() is (files._renameat2 is None)
    monkeypatch.setattr(files, "_links", True)  # what the fallback records once it has run
    assert arrivals() == ARRIVALS | IN_CREATE


def test_a_keyed_post_arrives_by_rename_so_a_waiting_claim_hears_it(h):
    """A keyed post publishes with a no-replace rename, not link(): a link would show only as a
    create, which a waiting claim no longer listens for, and the claim would sleep through it."""
    with (
        h.store.queue_dirs(HOST, QUEUE, create=True) as qd,
        watcher().channel([qd.proc_path("pending")], arrivals()) as channel,
    ):
        seen = channel.generation
        h.post(now=T0, idempotency_key="k-1")
        assert _moves(channel, seen)
    assert h.claim(now=T0 + 1) is not None
