"""What tells a file from one that replaced it under the same name, without reading either.

A record's content never changes while its name names it (every write is temp-then-rename), so
a file seen again with the same inode, mtime and size is the file read before. File times come
from a coarse clock (a few ms): a change in the same tick as the last look leaves an mtime as it
was, so an mtime this young is never trusted.
"""

from __future__ import annotations

import os
import time

RACY_NS = 100_000_000


def stamp(found: os.stat_result) -> int:
    """The file's stamp: its inode, mtime and size (a freed inode number is reused at once, so
    the inode alone does not tell). -1, never matched, while the mtime is young (RACY_NS)."""
    if time.time_ns() - found.st_mtime_ns < RACY_NS:
        return -1
    return hash((found.st_ino, found.st_mtime_ns, found.st_size))  # never -1 in CPython
