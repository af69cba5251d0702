"""The queue's post sequence: a number for each new task, higher than every one the queue gave
before, so that tasks posted in one millisecond are claimed and listed in the order they were
posted (postedAt alone ties them, and the id is random).

It is kept in one small file in the queue's directory, read and raised under an flock by every
post (a batch takes a run of numbers at once), so posts of every thread and process of one
queue draw from the same count. The file is rewritten in place without an fsync: a crash of a
process loses nothing (the page cache holds the write), and a machine that lost the write is
still safe, since a number is never below postedAt * PER_MS: a restart after a power cut draws
above every number given before it, as long as the clock did not go back and no millisecond
took more than PER_MS posts. It need not be gapless: a post that fails after its draw, or an
Idempotency-Key replay, leaves its number unused.
"""

from __future__ import annotations

import fcntl
import os
import stat

from . import strays
from .errors import StorageUnavailable
from .paths import QueueDirs

SEQ_FILE = "post-seq"
PER_MS = 1000  # numbers per millisecond of postedAt below which none is given
_WIDTH = 20  # digits, written whole each time: a shorter number never leaves a longer's tail
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def draw(qd: QueueDirs, count: int, *, posted_at: int) -> int:
    """The first of `count` consecutive numbers above every one drawn before in this queue."""
    try:
        fd = _open(qd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            last = _parse(os.pread(fd, _WIDTH + 1, 0))
            first = max(last + 1, posted_at * PER_MS)
            os.pwrite(fd, b"%0*d" % (_WIDTH, first + count - 1), 0)
        finally:
            os.close(fd)  # and with it the lock
    except OSError as exc:  # a full or failing disk
        raise StorageUnavailable(
            f"The store could not draw the queue's post sequence: {exc.strerror}."
        ) from exc
    return first


def _open(qd: QueueDirs) -> int:
    """The queue's post-seq, open. Anything else planted in its place (a symlink, a FIFO, a
    directory) is moved aside first (strays.py): the floor postedAt * PER_MS keeps the numbers
    of a new file above the ones given before."""
    # the queue's directory, as the parent of its pending/ (which was opened without
    # following a symlink): no descriptor more is kept open per queue for it
    queue_fd = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=qd.fd("pending"))
    try:
        for _ in range(2):
            try:
                fd = os.open(SEQ_FILE, _FLAGS, 0o644, dir_fd=queue_fd)
            except OSError as exc:
                if not strays.is_stray(exc):
                    raise
            else:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    return fd
                os.close(fd)
            strays.move_aside(qd, queue_fd, SEQ_FILE, "")
        raise StorageUnavailable("The queue's post sequence file keeps being replaced.")
    finally:
        os.close(queue_fd)


def _parse(data: bytes) -> int:
    """The last number drawn; 0 for a new file or one a power cut left torn (the floor
    postedAt * PER_MS then keeps the next number above the ones given before)."""
    return int(data) if len(data) == _WIDTH and data.isdigit() else 0
