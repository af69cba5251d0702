"""Reading complete lines of a day-file from a byte offset: the one rule the event stream's tail
and the Task Logs ingester share.

Many processes append to a day-file at once, each line with one `write`, so a reader may meet
the head of a line whose newline is not there yet. Only bytes up to the last newline count; the
rest is read again next time, whole. Plain Python: the store's readers import it without Django.
"""

from __future__ import annotations

import os
from typing import NamedTuple


class CompleteLines(NamedTuple):
    lines: bytes  # complete lines, the last ending in b"\n"; b"" when there is none yet
    # No newline in `limit` bytes: one line longer than the limit starts at the offset. The
    # caller decides: read it with a larger limit, or step past it.
    cut: bool


def read_complete_lines(fd: int, offset: int, limit: int) -> CompleteLines:
    """The complete lines among the `limit` bytes at `offset` of the open file `fd`.

    A line still being written (no newline yet) is left for the next read. An offset at or past
    the end (a file that shrank) reads nothing; whether that means "replaced" is the caller's
    to decide, from the inode or the size it knows."""
    data = os.pread(fd, limit, offset)
    end = data.rfind(b"\n") + 1
    lines = data if end == len(data) else data[:end]  # the common case: no copy
    return CompleteLines(lines, cut=not end and len(data) == limit)
