"""The soak's small mounts: made in its run directory, filled and freed, made read-only and
back, and always unmounted (lazily, so a process still holding a file there cannot keep the run
from ending).

The items disk is a tmpfs, remounted read-only and back. With --ext4-logs the logs disk is an
ext4 image on a loop device: its processes keep the day-file open for writing, and the kernel
refuses a read-only remount while a file is open so (busy), but an ext4 error (as a failing
disk gives; the fault writes ext4's trigger_fs_error) makes it read-only under every open file
at once, and only checking it and mounting it again (a new loop device: the old one lives on
while a process holds a file of it) brings it back. Otherwise the logs disk is a tmpfs too, and
its read-only fault is noted as not applied when the remount is busy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from pathlib import Path

FILLER = ".soak-filler"
CHUNK = b"\0" * (1 << 20)


class MountError(OSError):
    """mount(8) refused (an OSError, so the injector notes it as a fault not applied)."""


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603 (fixed argv)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise MountError(f"{' '.join(argv)}: {said[0] if said else done.returncode}")
    return done.stdout.strip()


def _mount(*args: str) -> None:
    _run("mount", *args)


def why_not_mountable(probe: Path) -> str | None:
    """None when this process may mount a tmpfs (it tries one on `probe`), else why not."""
    if os.geteuid() != 0:
        return "not root"
    probe.mkdir(parents=True, exist_ok=True)
    try:
        _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe))
    except (MountError, OSError) as exc:
        return str(exc)
    subprocess.run(["umount", "-l", str(probe)], check=False)  # noqa: S603, S607 (fixed argv)
    return None


def _loop_device(image: Path) -> str:
    return _run("losetup", "--find", "--show", str(image))


def _mount_ext4(image: Path, directory: Path) -> None:
    """Mount the image at `directory` on a loop device of its own, detached at once (lazily:
    the kernel frees it with its last user)."""
    device = _loop_device(image)
    try:
        subprocess.run(["e2fsck", "-f", "-y", device], capture_output=True, check=False)  # noqa: S603, S607 (fixed argv; exit 1: it fixed)
        _mount("-o", "errors=remount-ro", device, str(directory))
    finally:
        subprocess.run(["losetup", "--detach", device], capture_output=True, check=False)  # noqa: S603, S607 (fixed argv)


class Mounts:
    def __init__(self) -> None:
        self.mounted: list[Path] = []
        self.images: dict[Path, Path] = {}  # an ext4 mount's directory -> its image
        self.failed: set[Path] = set()  # ext4 mounts an error made read-only

    def make(self, directory: Path, size_mb: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        _mount("-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(directory))
        self.mounted.append(directory)

    def make_ext4(self, directory: Path, size_mb: int, image: Path) -> None:
        """An ext4 file system of `size_mb` in `image`, mounted at `directory` (MountError
        where loop devices cannot be had)."""
        directory.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as made:
            made.truncate(size_mb << 20)
        _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
        _mount_ext4(image, directory)
        self.mounted.append(directory)
        self.images[directory] = image

    def fail(self, directory: Path) -> None:
        """An ext4 error on the mount at `directory`: read-only at once, open files too."""
        source = _run("findmnt", "-n", "-o", "SOURCE", str(directory))
        trigger = Path("/sys/fs/ext4") / Path(source).name / "trigger_fs_error"
        trigger.write_text("taskhoster soak: a failing disk\n")
        self.failed.add(directory)

    def mount_again(self, directory: Path) -> None:
        """What an operator does after the error: unmount (lazily), check, mount again."""
        _run("umount", "-l", str(directory))
        _mount_ext4(self.images[directory], directory)
        self.failed.discard(directory)

    def fill(self, directory: Path) -> int:
        """Write a filler file until the mount answers ENOSPC; the bytes written."""
        written = 0
        fd = os.open(directory / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                try:
                    n = os.write(fd, CHUNK)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
                written += n
                if n < len(CHUNK):
                    continue  # the last bytes fitted: the next write answers ENOSPC
        finally:
            os.close(fd)
        return written

    def free(self, directory: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            (directory / FILLER).unlink()

    def read_only(self, directory: Path, tries: int = 40) -> int:
        """Remount read-only; the tries it took. The kernel refuses (busy) while any process
        holds a file there open for writing, so it is tried again `tries` times, 50 ms apart."""
        for attempt in range(1, tries + 1):
            try:
                _mount("-o", "remount,ro", str(directory))
                return attempt
            except MountError as exc:
                if "busy" not in str(exc) or attempt == tries:
                    raise
                time.sleep(0.05)
        return tries

    def read_write(self, directory: Path) -> None:
        _mount("-o", "remount,rw", str(directory))

    def unmount_all(self) -> None:
        for directory in reversed(self.mounted):
            subprocess.run(["umount", "-l", str(directory)], check=False)  # noqa: S603, S607 (fixed argv)
        self.mounted.clear()
