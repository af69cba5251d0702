"""Ingestion: incremental, complete lines only, bad lines counted, each line stored once."""

from __future__ import annotations

import io
import os
import time
from contextlib import suppress
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command

from tasklogs.ingest import ingest_day_file, ingest_directory
from tasklogs.models import IngestCursor, TaskEvent
from tasklogs.progress import ProgressBar

from .conftest import DAY1, encode, line, manage

pytestmark = pytest.mark.django_db
DAY2 = DAY1 + 86_400


def stored() -> list[tuple[str, str, int]]:
    return list(TaskEvent.objects.order_by("file", "offset").values_list("event", "file", "offset"))


def test_appends_are_read_incrementally(append, day_dir: Path) -> None:
    path = append("2025-01-01", line(event="posted"), line(event="claimed", ms=1))
    assert ingest_directory(day_dir).lines == 2
    append("2025-01-01", line(event="progress", ms=2))
    report = ingest_directory(day_dir)
    assert report.lines == 1  # only what was appended since
    assert [e for e, _, _ in stored()] == ["posted", "claimed", "progress"]
    cursor = IngestCursor.objects.get(name="2025-01-01.jsonl")
    assert (cursor.inode, cursor.offset) == (path.stat().st_ino, path.stat().st_size)


def test_a_release_is_an_event_task_logs_keeps(append, day_dir: Path) -> None:
    append("2025-01-01", line(event="posted"), line(event="released", ms=1))
    assert ingest_directory(day_dir).lines == 2
    assert [e for e, _, _ in stored()] == ["posted", "released"]


def test_every_field_is_stored(append, day_dir: Path) -> None:
    sizes = {"item": 1, "progress": 2, "result": 3, "error": 4}
    done = line(ms=7, event="result", status="finished", attempts=3, worker="box-1",
                archived=["result", "item"], sizes=sizes)  # fmt: skip
    append("2025-01-01", done)
    ingest_directory(day_dir)
    e = TaskEvent.objects.get()
    assert (e.t, e.at.timestamp(), e.event, e.status, e.attempts, e.worker) == (
        DAY1, DAY1 + 0.007, "result", "finished", 3, "box-1")  # fmt: skip
    assert (e.bytes_item, e.bytes_progress, e.bytes_result, e.bytes_error) == (1, 2, 3, 4)
    assert e.archived_kinds == ["item", "result"]
    assert (e.file, e.offset) == ("2025-01-01.jsonl", 0)


def test_a_partial_last_line_waits_until_it_is_finished(append, day_dir: Path) -> None:
    whole = encode(line(event="claimed", ms=1))
    path = append("2025-01-01", line(event="posted"), whole[:25])
    assert ingest_directory(day_dir).lines == 1
    assert IngestCursor.objects.get().offset == path.stat().st_size - 25
    append("2025-01-01", whole[25:])
    ingest_directory(day_dir)
    assert [e for e, _, _ in stored()] == ["posted", "claimed"]
    assert TaskEvent.objects.get(event="claimed").at.microsecond == 1000


def test_a_bad_line_is_counted_and_reported_never_fatal(append, day_dir: Path) -> None:
    append("2025-01-01", line(), b"not json\n", line(event="exploded"), line(event="claimed"))
    err = io.StringIO()
    call_command("ingest_tasklogs", stdout=io.StringIO(), stderr=err)
    assert [e for e, _, _ in stored()] == ["posted", "claimed"]
    first = len(encode(line()))
    assert f"bad line 2025-01-01.jsonl:{first}: not JSON" in err.getvalue()
    assert "unknown event" in err.getvalue()
    assert ingest_directory(day_dir).bad == 0  # reported once: the cursor is past them


def test_rerunning_stores_nothing_twice(append, day_dir: Path) -> None:
    append("2025-01-01", *(line(ms=i) for i in range(50)))
    ingest_directory(day_dir)
    ingest_directory(day_dir)
    IngestCursor.objects.all().delete()  # even a run that forgot where it was
    assert ingest_directory(day_dir).lines == 50
    assert TaskEvent.objects.count() == 50


def test_a_replaced_day_file_is_read_again_from_the_start(append, day_dir: Path) -> None:
    path = append("2025-01-01", line(event="posted"), line(event="claimed", ms=1))
    ingest_directory(day_dir)
    # Re-copied from the server (a new inode), with one more line and one line rewritten.
    copy = day_dir / "copy.tmp"
    cancelled = line(event="cancelled", status="cancelled", ms=1)
    copy.write_bytes(encode(line(event="posted"), cancelled, line(event="retried", ms=2)))
    os.replace(copy, path)
    assert ingest_directory(day_dir).lines == 3
    assert sorted(e for e, _, _ in stored()) == ["cancelled", "claimed", "posted", "retried"]


def test_a_pruned_day_file_keeps_its_events(append, day_dir: Path) -> None:
    old = append("2025-01-01", line(), line(ms=1))
    append("2025-01-02", line(t=DAY2))
    ingest_directory(day_dir)
    old.unlink()  # the store's sweep prunes day-files past retention
    call_command("ingest_tasklogs", stdout=io.StringIO())
    assert [f for _, f, _ in stored()] == ["2025-01-01.jsonl"] * 2 + ["2025-01-02.jsonl"]


def test_day_rollover_picks_up_the_new_day_file(append, day_dir: Path) -> None:
    append("2025-01-01", line(t=DAY2 - 1, ms=999))
    ingest_directory(day_dir)
    append("2025-01-02", line(t=DAY2, event="claimed"))
    append("2025-01-01", line(t=DAY2 - 1, ms=999, event="progress"))  # a late writer
    assert ingest_directory(day_dir).lines == 2
    assert [(e, f) for e, f, _ in stored()] == [
        ("posted", "2025-01-01.jsonl"), ("progress", "2025-01-01.jsonl"),
        ("claimed", "2025-01-02.jsonl"),
    ]  # fmt: skip


def test_other_names_in_the_directory_are_left_alone(append, day_dir: Path) -> None:
    append("2025-01-01", line())
    (day_dir / "notes.txt").write_text("not a day-file\n")
    (day_dir / "2025-01-03.jsonl").symlink_to(day_dir / "2025-01-01.jsonl")
    assert ingest_directory(day_dir).files == 1
    assert TaskEvent.objects.count() == 1


def test_ingest_day_file_alone_takes_a_path(append) -> None:
    path = append("2025-01-01", line(), line(ms=1))
    assert ingest_day_file(path).lines == 2
    assert ingest_day_file(path).lines == 0


def test_the_source_option_and_a_missing_directory(tmp_path: Path) -> None:
    other = tmp_path / "mirror"
    other.mkdir()
    (other / "2025-01-01.jsonl").write_bytes(encode(line()))
    out = io.StringIO()
    call_command("ingest_tasklogs", "--source", str(other), stdout=out)
    assert "1 event stored from 1 day-file in " in out.getvalue()
    with pytest.raises(Exception, match="is not a directory"):
        call_command("ingest_tasklogs", "--source", str(tmp_path / "missing"))


def test_the_progress_bar_draws_in_place() -> None:
    out = io.StringIO()
    bar = ProgressBar(2_000_000, out)
    bar(1_000_000)
    bar(1_000_000)
    bar.done()
    text = out.getvalue()
    assert "\r[###############...............]  50%  1.0/2.0 MB" in text
    assert text.endswith(" 100%  2.0/2.0 MB\n")


RACER = """
import os, sys, time, django
django.setup()
from django.core.management import call_command
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.005)
call_command("ingest_tasklogs", "--source", sys.argv[1])
"""


def test_two_concurrent_runs_store_each_line_once(live_db, day_dir: Path, tmp_path: Path) -> None:
    url, keys = live_db
    for day, t in (("2025-01-01", DAY1), ("2025-01-02", DAY2)):
        lines = (line(t=t + i // 1000, ms=i % 1000, task_id=f"{i:016x}") for i in range(20_000))
        (day_dir / f"{day}.jsonl").write_bytes(encode(*lines))
    go = tmp_path / "go"
    racers = [
        manage(url, "-c", RACER, str(day_dir), str(tmp_path / f"ready{n}"), str(go),
               stdout=-1, stderr=-1)
        for n in range(2)
    ]  # fmt: skip
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready{n}").exists() for n in range(2)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    go.touch()  # both start reading at offset 0 together: a real race on every chunk
    outputs = [racer.communicate(timeout=120) for racer in racers]
    assert [r.returncode for r in racers] == [0, 0], outputs
    found = keys()
    assert len(found) == 40_000
    assert len(set(found)) == 40_000
    read = sum(int(out.split()[0]) for out, _ in outputs if out.strip())
    assert read > 40_000  # they did overlap: some lines were read by both


def test_follow_wakes_on_appends_and_new_day_files(live_db, append, day_dir: Path) -> None:
    url, keys = live_db
    append("2025-01-01", line())
    follower = manage(url, "manage.py", "ingest_tasklogs", "--follow", "--source", str(day_dir),
                      stdout=-1, stderr=-1)  # fmt: skip
    try:
        wait_for(keys, 1)
        started = time.monotonic()
        append("2025-01-01", line(ms=1, event="claimed"))
        wait_for(keys, 2)
        append("2025-01-02", line(t=DAY2, event="progress"))
        wait_for(keys, 3)
        # Woken by the file system, not by the 30-second safety timer.
        assert time.monotonic() - started < 10
    finally:
        follower.terminate()
        follower.communicate(timeout=30)
    assert sorted(f for f, _ in keys()) == ["2025-01-01.jsonl"] * 2 + ["2025-01-02.jsonl"]


def wait_for(keys, count: int, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while len(keys()) < count:
        assert time.monotonic() < deadline, f"{len(keys())} of {count} lines after {seconds} s"
        time.sleep(0.05)


def test_an_overlong_line_is_one_bad_line(append, day_dir: Path, monkeypatch) -> None:
    chunk = len(encode(line())) + 10  # a good line fits in a chunk, the long one spans three
    monkeypatch.setattr("tasklogs.ingest.CHUNK_BYTES", chunk)
    append("2025-01-01", b"x" * chunk * 3 + b"\n", line())
    report = ingest_directory(day_dir)
    assert (report.lines, report.bad) == (2, 1)
    assert TaskEvent.objects.get().offset == chunk * 3 + 1


def test_a_day_file_rewritten_shorter_in_place_is_read_from_the_start(append, day_dir) -> None:
    path = append("2025-01-01", line(), line(ms=1), line(ms=2))
    ingest_directory(day_dir)
    inode = path.stat().st_ino
    with path.open("r+b") as f:  # same inode, other content: e.g. rsync --inplace
        f.truncate(0)
        f.write(encode(line(event="cancelled", status="cancelled", ms=5)))
    assert path.stat().st_ino == inode
    assert ingest_directory(day_dir).lines == 1
    assert TaskEvent.objects.filter(event="cancelled").count() == 1


def test_a_backfill_in_a_terminal_shows_a_progress_bar(live_db, day_dir: Path) -> None:
    import pty

    url, keys = live_db
    lines = (line(t=DAY1 + i // 1000, ms=i % 1000, task_id=f"{i:016x}") for i in range(20_000))
    (day_dir / "2025-01-01.jsonl").write_bytes(encode(*lines))  # over 4 MiB: worth a bar
    primary, secondary = pty.openpty()
    run = manage(url, "manage.py", "ingest_tasklogs", "--source", str(day_dir),
                 stdout=-1, stderr=secondary)  # fmt: skip
    os.close(secondary)
    out, _ = run.communicate(timeout=120)
    terminal = b""
    with suppress(OSError):  # EIO once the child has closed its end
        while chunk := os.read(primary, 4096):
            terminal += chunk
    os.close(primary)
    assert run.returncode == 0
    assert b"\r[" in terminal and b"100%" in terminal
    assert "20000 events stored" in out and "[" not in out  # the bar is not in the (piped) output
    assert len(keys()) == 20_000


def test_the_command_makes_the_default_source_on_a_fresh_install(settings, tmp_path):
    """`make run` starts ingestion before any task exists: no day-file directory yet."""
    from django.core.management import call_command

    settings.TASKHOSTER_LOGS_DIR = tmp_path / "fresh-logs"
    call_command("ingest_tasklogs")
    assert (tmp_path / "fresh-logs" / "tasks").is_dir()


def test_the_command_refuses_a_missing_explicit_source(tmp_path):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="not a directory"):
        call_command("ingest_tasklogs", "--source", str(tmp_path / "nowhere"))


def test_a_chunk_a_peer_stored_meanwhile_is_counted_not_stored(append, day_dir: Path) -> None:
    """The chunk's transaction reads its cursor under a lock: found past the chunk (a peer
    stored it while this run read it), the lines are counted and the chunk trusted stored."""
    from tasklogs.ingest import _store, db_time

    path = append("2025-01-01", line(), line(ms=1), line(ms=2, event="claimed"))
    stale = IngestCursor.objects.create(name=path.name, inode=path.stat().st_ino, offset=0)
    ingest_directory(day_dir)  # the peer: stores all three, moves the cursor to the end
    TaskEvent.objects.filter(offset=0).delete()  # so that storing again would be seen
    block = path.read_bytes()
    report = _store(block, path.name, 0, len(block), stale, db_time())
    assert (report.lines, report.bad) == (3, 0)
    assert TaskEvent.objects.count() == 2  # nothing stored: the cursor said it was
    assert stale.offset == len(block)  # the run's own copy of the cursor caught up


def test_an_ingester_killed_mid_backfill_loses_nothing_and_stores_nothing_twice(
    live_db, day_dir: Path
) -> None:
    """SIGKILL while chunks are being stored (on PostgreSQL, copied straight into the table):
    a chunk's rows and its cursor's advance commit together, so the next run stores exactly
    the lines the killed one did not."""
    import signal

    url, keys = live_db
    lines = (line(t=DAY1 + i // 1000, ms=i % 1000, task_id=f"{i:016x}") for i in range(60_000))
    (day_dir / "2025-01-01.jsonl").write_bytes(encode(*lines))  # a dozen chunks
    victim = manage(url, "manage.py", "ingest_tasklogs", "--source", str(day_dir),
                    stdout=-1, stderr=-1)  # fmt: skip
    deadline = time.monotonic() + 120
    while not keys():  # the first chunk is committed: the next ones are under way
        assert victim.poll() is None, "the ingester finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    assert 0 < len(keys()) < 60_000  # killed part-way
    rerun = manage(url, "manage.py", "ingest_tasklogs", "--source", str(day_dir),
                   stdout=-1, stderr=-1)  # fmt: skip
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    found = keys()
    assert len(found) == len(set(found)) == 60_000


def test_lines_read_and_then_lost_by_the_disk_are_withdrawn(append, day_dir) -> None:
    """The logs disk failed before it wrote the last lines the ingester had read: once it is
    mounted again the same file (the same inode) ends before them, and the lines the store
    spooled meanwhile are appended where they were. Task Logs then holds what the file holds."""
    kept = [line(ms=0), line(event="claimed", status="processing", attempts=1, ms=1)]
    lost = [line(event="result", status="finished", attempts=1, ms=2), line(ms=3, task_id="1" * 16)]
    path = append("2025-01-01", *kept, *lost)
    ingest_directory(day_dir)
    inode = path.stat().st_ino
    with path.open("r+b") as f:  # what the disk kept: the file up to the first lost line
        f.truncate(len(encode(*kept)))
    # the spooled lines, drained after the store's own next line: longer than the file was
    again = [line(event="posted", ms=4, task_id="2" * 16), *lost]
    append("2025-01-01", *again)
    assert path.stat().st_ino == inode
    ingest_directory(day_dir)
    stored_lines = [(r.event, r.offset) for r in TaskEvent.objects.order_by("offset")]
    in_file = path.read_bytes().splitlines(keepends=True)
    offsets = [sum(len(x) for x in in_file[:i]) for i in range(len(in_file))]
    events = [orjson.loads(x)["event"] for x in in_file]
    assert stored_lines == list(zip(events, offsets, strict=True))
