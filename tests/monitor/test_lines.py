"""read_complete_lines: the one "complete lines from an offset" of the tail and the ingester."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from queues.monitor.lines import CompleteLines, read_complete_lines


@pytest.fixture
def day_file(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    path = tmp_path / "2025-07-01.jsonl"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    yield path, fd
    os.close(fd)


def grow(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def test_complete_lines_are_read_and_a_partial_last_line_is_left(day_file) -> None:
    path, fd = day_file
    grow(path, b'{"n":1}\n{"n":2}\n{"n":')
    assert read_complete_lines(fd, 0, 1 << 20) == CompleteLines(b'{"n":1}\n{"n":2}\n', cut=False)
    assert read_complete_lines(fd, 8, 1 << 20).lines == b'{"n":2}\n'
    # The partial line is read whole once its writer finished it.
    grow(path, b"3}\n")
    assert read_complete_lines(fd, 16, 1 << 20).lines == b'{"n":3}\n'


def test_an_empty_file_and_an_offset_at_the_end_read_nothing(day_file) -> None:
    path, fd = day_file
    assert read_complete_lines(fd, 0, 64) == CompleteLines(b"", cut=False)
    grow(path, b'{"n":1}\n')
    assert read_complete_lines(fd, 8, 64) == CompleteLines(b"", cut=False)


def test_a_file_that_shrank_below_the_offset_reads_nothing(day_file) -> None:
    path, fd = day_file
    grow(path, b'{"n":1}\n{"n":2}\n')
    os.truncate(path, 8)  # the callers notice from their own size or inode and start over
    assert read_complete_lines(fd, 16, 64) == CompleteLines(b"", cut=False)
    assert read_complete_lines(fd, 0, 64).lines == b'{"n":1}\n'


def test_the_limit_bounds_a_read_to_whole_lines(day_file) -> None:
    path, fd = day_file
    grow(path, b"aaaa\nbbbb\ncccc\n")
    assert read_complete_lines(fd, 0, 12) == CompleteLines(b"aaaa\nbbbb\n", cut=False)
    assert read_complete_lines(fd, 0, 15).lines == b"aaaa\nbbbb\ncccc\n"


def test_a_line_longer_than_the_limit_is_cut_not_a_line_being_written(day_file) -> None:
    path, fd = day_file
    grow(path, b"x" * 10)
    # Ten bytes with no newline: within a limit of 10, a line too long to tell; within 11, a
    # line still being written.
    assert read_complete_lines(fd, 0, 10) == CompleteLines(b"", cut=True)
    assert read_complete_lines(fd, 0, 11) == CompleteLines(b"", cut=False)
    grow(path, b"\n")
    assert read_complete_lines(fd, 0, 10).cut
    assert read_complete_lines(fd, 0, 11) == CompleteLines(b"x" * 10 + b"\n", cut=False)
