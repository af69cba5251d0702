"""The soak's small tmpfs mounts: made in its run directory, filled and freed, remounted
read-only and back, and always unmounted (lazily, so a process still holding a file there
cannot keep the run from ending)."""

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


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)  # noqa: S603, S607 (fixed argv)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise MountError(f"mount {' '.join(args)}: {said[0] if said else done.returncode}")


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


class Mounts:
    def __init__(self) -> None:
        self.mounted: list[Path] = []

    def make(self, directory: Path, size_mb: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        _mount("-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(directory))
        self.mounted.append(directory)

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
