"""Where the power-loss tests build their crash states: a directory in RAM when the machine has
one, because materialising and removing thousands of small trees is what those tests spend their
time on, and on a disk mounted with `discard` each removed directory costs a millisecond."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

RAM = Path("/dev/shm")


def ram_is_there() -> bool:
    """Whether /dev/shm is a writable tmpfs (not a plain directory on the disk)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return False
    on_tmpfs = any(line.split()[1:3] == [str(RAM), "tmpfs"] for line in mounts)
    return on_tmpfs and RAM.is_dir() and not RAM.is_symlink()


@pytest.fixture
def crash_root(tmp_path: Path) -> Iterator[Path]:
    """A fresh directory for the crash states (each is built, checked and removed there): in
    RAM when there is a tmpfs, else the test's tmp_path. The recording itself stays on tmp_path,
    where its fsyncs reach a real disk."""
    if not ram_is_there():
        yield tmp_path
        return
    root = Path(tempfile.mkdtemp(prefix="taskhoster-crash-", dir=RAM))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
