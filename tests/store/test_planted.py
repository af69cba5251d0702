"""Things planted in a queue's state directories that are no task of it: FIFOs, sockets,
devices, directories, symlinks, corrupt and foreign files, and records of another tenant.

None of them may block or crash a claim, a listing or the sweep; the sweep (and a claim that
meets one) moves a task-named one aside to the queue's quarantine/ and logs `quarantined`.
"""

from __future__ import annotations

import os
import signal
import socket
import stat

import orjson
import pytest

from queues.store import sweep_queue

from .conftest import HOST, QUEUE, SETTINGS, T0
from .test_sweep import spec_record

PLANTED = "9f2c1a0b7d4e6f83"


@pytest.fixture
def q(h):
    h.store.create_queue(HOST, QUEUE)
    return h


@pytest.fixture(autouse=True)
def no_hang():
    """A call that blocks (an open() of a FIFO waits for a writer forever) fails the test."""

    def hung(signum, frame):
        raise AssertionError("blocked on a planted file")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _fifo(path):
    os.mkfifo(path)


def _socket(path):
    sock, cwd = socket.socket(socket.AF_UNIX), os.getcwd()
    os.chdir(path.parent)  # a socket's path has a length limit that tmp paths pass
    try:
        sock.bind(path.name)
    finally:
        os.chdir(cwd)
        sock.close()  # the socket file stays


def _device(path):
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers


def _directory(path):
    path.mkdir()


def _symlink_to_fifo(path):
    os.mkfifo(path.with_name("target"))
    path.symlink_to(path.with_name("target"))


KINDS = {
    "fifo": _fifo,
    "socket": _socket,
    "device": _device,
    "directory": _directory,
    "symlink": _symlink_to_fifo,
}


@pytest.mark.parametrize("directory", ["pending", "processing", "done"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_non_regular_file_under_a_task_name_blocks_nothing_and_is_quarantined(q, kind, directory):
    good = q.post()
    KINDS[kind](q.queue_dir / directory / f"{PLANTED}.json")
    assert [t.id for t in q.store.list_tasks(HOST, QUEUE).tasks] == [good.id]
    assert q.claim().id == good.id
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 2000)
    assert report.quarantined == 1 and report.errors == []
    assert not os.path.lexists(q.queue_dir / directory / f"{PLANTED}.json")
    [aside] = (q.queue_dir / "quarantine").iterdir()
    assert aside.name.startswith(PLANTED)
    assert q.event_names(PLANTED) == ["quarantined"]


def test_a_fifo_read_as_a_task_by_the_console_or_a_verb_answers_not_found(q):
    os.mkfifo(q.queue_dir / "pending" / f"{PLANTED}.json")
    with pytest.raises(Exception) as caught:
        q.store.read(HOST, QUEUE, PLANTED)
    assert type(caught.value).__name__ == "NotFound"


@pytest.mark.parametrize(
    "content", [b"", b'{"id": "9f2c', b"{not json", b"\x00" * 64, b'{"id": 5}']
)
def test_corrupt_and_truncated_records_never_crash_a_claim_or_a_listing(q, content):
    good = q.post()
    (q.queue_dir / "pending" / f"{PLANTED}.json").write_bytes(content)
    assert [t.id for t in q.store.list_tasks(HOST, QUEUE).tasks] == [good.id]
    assert q.claim().id == good.id
    assert sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 2000).quarantined == 1


def test_foreign_files_in_a_state_directory_are_left_alone(q):
    good = q.post()
    for name in ("notes.txt", f"{PLANTED}.json.bak", "README"):
        (q.queue_dir / "pending" / name).write_text("not ours")
    os.mkfifo(q.queue_dir / "pending" / "a-fifo")
    assert [t.id for t in q.store.list_tasks(HOST, QUEUE).tasks] == [good.id]
    assert q.claim().id == good.id
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 2000)
    assert report.quarantined == 0 and report.errors == []
    assert (q.queue_dir / "pending" / "notes.txt").read_text() == "not ours"


MISPLACED = {
    "another host": {"host": "other.example.com"},
    "another queue": {"queue": "thumbs"},
    "another id": {"id": "0123456789abcdef"},
}


@pytest.mark.parametrize("change", sorted(MISPLACED))
def test_a_record_of_another_tenant_is_never_claimed_and_is_quarantined(q, change):
    record = {**spec_record(PLANTED, "pending"), **MISPLACED[change]}
    (q.queue_dir / "pending" / f"{PLANTED}.json").write_bytes(orjson.dumps(record))
    assert q.store.list_tasks(HOST, QUEUE).tasks == []
    assert q.claim() is None
    assert not (q.queue_dir / "pending" / f"{PLANTED}.json").exists()
    [aside] = (q.queue_dir / "quarantine").iterdir()
    assert orjson.loads(aside.read_bytes()) == record
    assert [(e["event"], e["host"], e["queue"]) for e in q.events(PLANTED)] == [
        ("quarantined", HOST, QUEUE)
    ]  # logged under the queue it lay in, never under the tenant it names


@pytest.mark.parametrize("directory", ["processing", "done"])
@pytest.mark.parametrize("change", sorted(MISPLACED))
def test_the_sweep_quarantines_a_record_of_another_tenant(q, change, directory):
    status = {"processing": "processing", "done": "finished"}[directory]
    record = {**spec_record(PLANTED, status), **MISPLACED[change]}
    (q.queue_dir / directory / f"{PLANTED}.json").write_bytes(orjson.dumps(record))
    assert q.store.list_tasks(HOST, QUEUE).tasks == []
    report = sweep_queue(q.store, HOST, QUEUE, SETTINGS, now=T0 + 2000)
    assert report.quarantined == 1 and report.requeue == 0 and report.cleaned == 0
    assert [e["event"] for e in q.events() if e["event"] != "quarantined"] == []
