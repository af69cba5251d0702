"""A day-file that lost lines Task Logs had read: withdraw their rows, read on from where the
file and the rows agree.

The ingester may read a line before the disk has it: the store appends, then flushes. When the
logs disk fails in between (ext4 made read-only by an error), the flush is refused, the store
spools the line and writes it again later, elsewhere in the file, and the line the ingester read
is gone once the disk is checked and mounted again: the same file (the same inode) now holds
other lines where it was, or ends before it. Its row would be a ghost (the task's event stored
twice, once where no line is). So before each read of a day-file whose inode it knows, the
ingester checks that the newest row it stored below its cursor is still the line at its offset
(one query and one short read); if not, it walks back through the rows until one is, withdraws
those it passed, and moves the cursor to that line's end.

A day-file replaced by another inode (re-copied from a server) keeps the old policy (ingest.py):
read from the start, its old rows kept.
"""

from __future__ import annotations

import os

from django.db import transaction

from .models import IngestCursor, TaskEvent
from .parsing import line_digest

_LONGEST = 1 << 20  # no event line is longer (ingest.CHUNK_BYTES reads no longer one either)
_BATCH = 500


def withdraw_lost_tail(fd: int, name: str, cursor: IngestCursor) -> int:
    """Withdraw the rows of `name` past the last one its file still holds, and move `cursor`
    back to that line's end; how many rows were withdrawn (0 in the common case)."""
    if cursor.offset == 0:
        return 0
    # newest first: the lost lines are the last ones read, and rows of an earlier inode of the
    # same name (kept, above) are older than every row of this one
    rows = TaskEvent.objects.filter(file=name, offset__lt=cursor.offset).order_by("-pk")
    last = rows.values_list("offset", "digest").first()
    if last is None or _held_length(fd, *last) is not None:
        return 0
    with transaction.atomic():
        locked = IngestCursor.objects.select_for_update().filter(pk=cursor.pk)
        if locked.values_list("offset", flat=True).get() != cursor.offset:
            return 0  # another ingester moved it meanwhile: the next read checks again
        lost: list[int] = []
        agreed = 0
        for pk, offset, digest in rows.values_list("pk", "offset", "digest").iterator(_BATCH):
            length = _held_length(fd, offset, digest)
            if length is not None:
                agreed = offset + length + 1
                break
            lost.append(pk)
        for start in range(0, len(lost), _BATCH):
            TaskEvent.objects.filter(pk__in=lost[start : start + _BATCH]).delete()
        locked.update(offset=agreed)
    cursor.offset = agreed
    return len(lost)


def _line_at(fd: int, offset: int) -> bytes | None:
    """The complete line at `offset` (without its newline); None where there is none."""
    data = b""
    while len(data) < _LONGEST:
        more = os.pread(fd, max(4096, len(data)), offset + len(data))
        if not more:
            return None
        end = more.find(b"\n")
        if end >= 0:
            return data + more[:end]
        data += more
    return None


def _held_length(fd: int, offset: int, digest: int) -> int | None:
    """The length of the line at `offset` if it is the row's line (its digest), else None."""
    line = _line_at(fd, offset)
    return len(line) if line is not None and line_digest(line) == digest else None
