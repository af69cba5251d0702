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


@contextlib.contextmanager
def ext4_fs(where: Path, image: Path, *, size: str = "16M") -> Iterator[Path]:
    """An ext4 file system on a loop device, mounted at `where` with errors=remount-ro, for
    the block (skips the test if not allowed)."""
    where.mkdir(parents=True, exist_ok=True)
    if not (
        _run("truncate", "-s", size, str(image))
        and _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
        and _run("mount", "-o", "loop,errors=remount-ro", str(image), str(where))
    ):
        pytest.skip("mounting an ext4 image on a loop device is not permitted here")
    try:
        yield where
    finally:
        _run("umount", "-l", str(where))


def fail_ext4(where: Path) -> None:
    """An error of the ext4 file system at `where`, as a failing disk gives: the kernel makes
    it read-only at once, open descriptors too (what a remount,ro refuses to do while a file
    is open for writing), until it is checked and mounted again (mount_again)."""
    source = subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(where)], capture_output=True,
                            text=True, check=True).stdout.strip()  # fmt: skip
    trigger = Path("/sys/fs/ext4") / Path(source).name / "trigger_fs_error"
    trigger.write_text("taskhoster test: a failing disk")


def mount_again(where: Path, image: Path) -> None:
    """What an operator does after a disk error: unmount (lazily: processes may hold files
    there), check, and mount the file system at the same place."""
    unmount(where)
    mount_image(where, image)


def unmount(where: Path) -> None:
    """Unmount lazily (processes may hold files there): its path is the mount point's now."""
    assert _run("umount", "-l", str(where))


def mount_image(where: Path, image: Path) -> None:
    """Check the ext4 image and mount it at `where`."""
    # a loop device of its own: `mount -o loop` would take the old one again, whose file
    # system lives on, failed, while a process holds a file of it
    device = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                            text=True, check=True).stdout.strip()  # fmt: skip
    subprocess.run(["e2fsck", "-f", "-y", device], capture_output=True)  # exit 1: it fixed
    assert _run("mount", "-o", "errors=remount-ro", device, str(where))
    assert _run("losetup", "--detach", device)  # lazily: freed with its last user
