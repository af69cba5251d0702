"""The ingester-not-running notice: from the day-files and the cursors, with `now` given."""

from __future__ import annotations

import os

import pytest

from tasklogs.health import START_COMMAND, ingest_lag
from tasklogs.ingest import ingest_directory

from .conftest import DAY1, line

pytestmark = pytest.mark.django_db


def test_nothing_logged_yet_is_no_lag(store_dirs):
    assert ingest_lag(store_dirs["logs"] / "tasks", now_s=DAY1) is None
    (store_dirs["logs"] / "tasks").mkdir()
    assert ingest_lag(store_dirs["logs"] / "tasks", now_s=DAY1) is None


def test_lines_never_ingested_are_a_lag_once_they_are_old_enough(append, day_dir):
    append("2025-01-01", line(t=DAY1 + 10), line(t=DAY1 + 20, event="claimed"))
    assert ingest_lag(day_dir, now_s=DAY1 + 60) is None  # a follower may not have woken yet
    lag = ingest_lag(day_dir, now_s=DAY1 + 10 + 121)
    assert lag is not None
    assert lag.oldest_t == DAY1 + 10 and lag.day_files == 1
    assert lag.unread_bytes == (day_dir / "2025-01-01.jsonl").stat().st_size
    assert lag.command == START_COMMAND == "manage.py ingest_tasklogs --follow"


def test_an_ingested_log_is_no_lag_and_new_lines_start_the_clock_again(append, day_dir):
    append("2025-01-01", line(t=DAY1))
    ingest_directory(day_dir)
    assert ingest_lag(day_dir, now_s=DAY1 + 86_400) is None
    append("2025-01-01", line(t=DAY1 + 500, event="claimed"))
    assert ingest_lag(day_dir, now_s=DAY1 + 600) is None
    lag = ingest_lag(day_dir, now_s=DAY1 + 800)
    assert lag is not None and lag.oldest_t == DAY1 + 500


def test_the_oldest_line_behind_counts_across_day_files(append, day_dir):
    append("2025-01-01", line(t=DAY1 + 5))
    ingest_directory(day_dir)
    append("2025-01-01", line(t=DAY1 + 86_000, event="claimed"))
    append("2025-01-02", line(t=DAY1 + 86_400 + 3, event="result"))
    lag = ingest_lag(day_dir, now_s=DAY1 + 90_000)
    assert lag is not None and lag.oldest_t == DAY1 + 86_000 and lag.day_files == 2


def test_a_line_still_being_written_is_not_late(append, day_dir):
    append("2025-01-01", b'{"t": 1735689600, "at": "2025-01-')
    assert ingest_lag(day_dir, now_s=DAY1 + 86_400) is None


def test_a_bad_line_at_the_cursor_is_dated_by_the_file(append, day_dir):
    path = append("2025-01-01", b"not json\n")
    os.utime(path, (DAY1 + 100, DAY1 + 100))
    assert ingest_lag(day_dir, now_s=DAY1 + 200) is None
    lag = ingest_lag(day_dir, now_s=DAY1 + 300)
    assert lag is not None and lag.oldest_t == DAY1 + 100


def test_a_replaced_day_file_is_read_from_its_start(append, day_dir):
    path = append("2025-01-01", line(t=DAY1))
    ingest_directory(day_dir)
    # A new inode, as a re-copy from the server makes (written beside, then renamed over).
    append("copy", line(t=DAY1 + 1)).rename(path)
    lag = ingest_lag(day_dir, now_s=DAY1 + 1_000)
    assert lag is not None and lag.oldest_t == DAY1 + 1
