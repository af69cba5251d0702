"""Where each program's process-memory figures live on disk, and tidying that place at start.

prometheus_client's multiprocess mode keeps each process's figures in memory-mapped files
named by pid (`counter_1234.db`, `gauge_livesum_1234.db`, ...) in PROMETHEUS_MULTIPROC_DIR.
taskhoster gives each program a directory of its own under one root (`web/` for gunicorn's
workers, `sweep/` for the sweep loop), so that one program's start never touches another's
files, and /metrics reads them all.

The root is in memory (/dev/shm), one per installation (its var/ directory) and user, unless
TASKHOSTER_METRICS_DIR names one (a relative one is taken under var/, so that programs started
from different directories agree): the figures are written to these files every second, and on
the store's disk each of the store's flushes (syncfs) would write them back too.

Plain Python, no prometheus_client import: this runs in gunicorn's master before any worker
imports prometheus_client, which reads the directory from the environment when it is first
imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"
CHOSEN = "TASKHOSTER_METRICS_DIR"
# A directory of our own in it (mode 0700, its owner checked in prepare), never a shared file
MEMORY = Path("/dev/shm")  # noqa: S108  # nosec B108
_PID_FILE = re.compile(r"_(\d+)\.db$")


def root(var_dir: str | os.PathLike[str]) -> Path:
    chosen = os.environ.get(CHOSEN, "").strip()
    if chosen:
        return Path(var_dir) / chosen  # an absolute one stays as it is
    if MEMORY.is_dir():
        return in_memory(var_dir)
    return Path(var_dir) / "metrics"


def in_memory(var_dir: str | os.PathLike[str]) -> Path:
    """The default root of the installation whose var/ is `var_dir`, under /dev/shm."""
    tag = hashlib.sha256(str(Path(var_dir).resolve()).encode()).hexdigest()[:12]
    return MEMORY / f"taskhoster-metrics-{os.getuid()}-{tag}"


def directory(var_dir: str | os.PathLike[str], program: str) -> Path:
    return root(var_dir) / program


def prepare(var_dir: str | os.PathLike[str], program: str) -> Path:
    """Create the program's directory and remove the files of processes that are gone (a
    previous run's), keeping those of live ones; then point this process's environment (and
    so its children's) at it. Returns the directory."""
    top = root(var_dir)
    top.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = os.lstat(top)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        # someone else's directory (or a link) under a shared /dev/shm: not ours to trust
        raise PermissionError(f"{top} is not a directory of this user; set {CHOSEN}")
    where = directory(var_dir, program)
    where.mkdir(mode=0o700, exist_ok=True)
    for path in where.iterdir():
        found = _PID_FILE.search(path.name)
        if found is None or not _alive(int(found.group(1))):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    os.environ[ENV] = str(where)
    return where


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # a pid of a previous run that this process happens to have now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
