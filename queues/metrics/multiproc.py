"""Where each program's process-memory figures live on disk, and tidying that place at start.

prometheus_client's multiprocess mode keeps each process's figures in memory-mapped files
named by pid (`counter_1234.db`, `gauge_livesum_1234.db`, ...) in PROMETHEUS_MULTIPROC_DIR.
taskhoster gives each program a directory of its own under `<var>/metrics/` (`web/` for
gunicorn's workers, `sweep/` for the sweep loop), so that one program's start never touches
another's files, and /metrics reads them all. Plain Python, no prometheus_client import: this
runs in gunicorn's master before any worker imports prometheus_client, which reads the
directory from the environment when it is first imported.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"
_PID_FILE = re.compile(r"_(\d+)\.db$")


def root(var_dir: str | os.PathLike[str]) -> Path:
    return Path(var_dir) / "metrics"


def directory(var_dir: str | os.PathLike[str], program: str) -> Path:
    return root(var_dir) / program


def prepare(var_dir: str | os.PathLike[str], program: str) -> Path:
    """Create the program's directory and remove the files of processes that are gone (a
    previous run's), keeping those of live ones; then point this process's environment (and
    so its children's) at it. Returns the directory."""
    where = directory(var_dir, program)
    where.mkdir(parents=True, exist_ok=True)
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
