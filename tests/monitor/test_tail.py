"""The log tail: complete lines only, positions that resume exactly, and the day rollover."""

import datetime as dt
import threading
import time

import pytest

from queues.monitor.stream import Subscription, event_stream
from queues.monitor.tail import BadPosition, LogTail, Position
from queues.store.inotify import APPENDS, watcher

D1, D2, D3 = dt.date(2025, 7, 1), dt.date(2025, 7, 2), dt.date(2025, 7, 3)


def append(logs, day, text):
    (logs / "tasks").mkdir(parents=True, exist_ok=True)
    with open(logs / "tasks" / f"{day}.jsonl", "ab") as f:
        f.write(text.encode())


def line(n, queue="q", task="a" * 16, event="posted"):
    return f'{{"n":{n},"host":"h.example","queue":"{queue}","id":"{task}","event":"{event}"}}\n'


def test_a_new_reader_starts_at_the_end(tmp_path):
    append(tmp_path, D1, line(1))
    tail = LogTail(tmp_path, today=lambda: D1)
    assert tail.read() == []
    append(tmp_path, D1, line(2))
    [(pos, text)] = tail.read()
    assert b'"n":2' in text
    assert pos == Position(D1, len(line(1)) + len(line(2)))


def test_a_half_written_line_waits_for_its_end(tmp_path):
    tail = LogTail(tmp_path, today=lambda: D1)
    full = line(1)
    append(tmp_path, D1, full[:10])
    assert tail.read() == []
    append(tmp_path, D1, full[10:])
    assert [t for _, t in tail.read()] == [full.strip().encode()]


def test_resume_from_a_position_repeats_nothing_and_skips_nothing(tmp_path):
    for n in range(5):
        append(tmp_path, D1, line(n))
    seen = LogTail(tmp_path, Position(D1, 0), today=lambda: D1).read()
    resumed = LogTail(tmp_path, seen[1][0], today=lambda: D1).read()
    assert [t for _, t in resumed] == [t for _, t in seen[2:]]


def test_the_rollover_is_followed_and_yesterday_still_read(tmp_path):
    today = [D1]
    append(tmp_path, D1, line(1))
    tail = LogTail(tmp_path, Position(D1, 0), today=lambda: today[0])
    assert len(tail.read()) == 1
    today[0] = D2
    append(tmp_path, D2, line(2))
    append(tmp_path, D1, line(3))  # a late line stamped before midnight
    got = tail.read()
    assert sorted(b'"n":2' in t or b'"n":3' in t for _, t in got) == [True, True]
    today[0] = D3
    append(tmp_path, D3, line(4))
    assert [t for _, t in tail.read()] == [line(4).strip().encode()]
    assert D1 not in tail.offsets


def test_a_resume_from_an_older_day_reads_every_later_file(tmp_path):
    append(tmp_path, D1, line(1))
    append(tmp_path, D3, line(3))
    got = LogTail(tmp_path, Position(D1, 0), today=lambda: D3).read()
    assert [pos.day for pos, _ in got] == [D1, D3]


@pytest.mark.parametrize("text", ["", "2025-07-01", "x:1", "2025-13-01:5", "2025-07-01:-1"])
def test_bad_positions_are_refused(text):
    with pytest.raises(BadPosition):
        Position.parse(text)


def test_the_stream_wakes_on_an_append_and_filters(tmp_path):
    today = dt.datetime.now(dt.UTC).date()
    (tmp_path / "tasks").mkdir()
    channel = watcher().channel([str(tmp_path / "tasks")], APPENDS)
    sub = Subscription(host="h.example", queue="q", task_id="b" * 16)
    stream = event_stream(LogTail(tmp_path), channel, sub, keepalive=30)
    assert next(stream).startswith(b"retry:")

    def later():
        time.sleep(0.05)
        append(tmp_path, today, line(1, task="a" * 16) + line(2, queue="other", task="b" * 16))
        append(tmp_path, today, line(3, task="b" * 16, event="claimed"))

    threading.Thread(target=later).start()
    started = time.monotonic()
    chunk = next(stream)
    assert time.monotonic() - started < 1.0  # woken by inotify, not by the 30 s keep-alive
    assert chunk.startswith(b"id: " + today.isoformat().encode())
    assert b"event: claimed\ndata: " in chunk and b'"n":3' in chunk
    assert b'"n":1' not in chunk and b'"n":2' not in chunk
    stream.close()


def test_an_idle_stream_sends_keep_alives(tmp_path):
    (tmp_path / "tasks").mkdir()
    sub = Subscription(host="h.example", queue="q")
    channel = watcher().channel([str(tmp_path / "tasks")], APPENDS)
    stream = event_stream(LogTail(tmp_path), channel, sub, keepalive=0.1)
    next(stream)
    assert next(stream) == b": keep-alive\n\n"
