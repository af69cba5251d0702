"""Real storage faults for the tests: a small tmpfs that fills up, remounted read-only.

As root, permissions do not stop a write (a chmod 0555 directory is still writable), so a
read-only file system is the one real way to refuse it; a tmpfs of a few pages is a full disk
once a filler file takes what is left. Tests that need them skip where mounting is not allowed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*args: str) -> bool:
    return subprocess.run(args, capture_output=True).returncode == 0


@contextlib.contextmanager
def small_fs(where: Path, *, size: str = "64k") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` for the block (skips the test if not allowed)."""
    where.mkdir(parents=True, exist_ok=True)
    if not _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)):
        pytest.skip("mounting a tmpfs is not permitted here (root in a privileged container)")
    try:
        yield where
    finally:
        _run("umount", "-l", str(where))


def read_only(where: Path) -> None:
    """Remount the tmpfs at `where` read-only: every write under it fails with EROFS."""
    assert _run("mount", "-o", "remount,ro", str(where))


def writable(where: Path) -> None:
    assert _run("mount", "-o", "remount,rw", str(where))


def fill(where: Path) -> Path:
    """Take every free byte of the file system at `where` with a filler file; returns it."""
    filler = where / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 512, 64, 8, 1):
            while True:
                try:
                    if os.write(fd, b"\0" * size) < size:
                        break
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler
