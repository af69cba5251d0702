"""A migrated SQLite console database for the processes a test starts: `manage.py migrate` runs
once per pytest process into a template, and each test gets a copy of it (a migrate costs ~2 s
of a child's start-up, and the suite's setups made some forty). The migrations are schema only
(no RunPython), so a copy is the database a migrate would leave; what the children do with it
is as deployed. A database that is not an SQLite file is migrated for real."""

from __future__ import annotations

import atexit
import contextlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SQLITE = "sqlite:///"
_template: list[Path] = []  # this process's, made by its first call


def migrate(env: Mapping[str, str], *, cwd: Path = ROOT) -> None:
    """What `manage.py migrate -v0` in `cwd` with `env` would leave."""
    target = sqlite_file(env)
    if target is None:
        _migrate_for_real(env, cwd)
        return
    if not _template:
        where = Path(tempfile.mkdtemp(prefix="taskhoster-migrated-"))
        atexit.register(shutil.rmtree, where, True)
        template = where / "db.sqlite3"
        _migrate_for_real({**env, "DATABASE_URL": SQLITE + str(template)}, cwd)
        with contextlib.closing(sqlite3.connect(template)) as db:  # the settings' WAL mode:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all of it in the file copied
        _template.append(template)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_template[0], target)


def sqlite_file(env: Mapping[str, str]) -> Path | None:
    """The SQLite file `env` gives the console (settings.py's default: var/taskhoster.sqlite3)."""
    url = env.get("DATABASE_URL")
    if url is None:
        return Path(env["TASKHOSTER_VAR_DIR"]) / "taskhoster.sqlite3"
    return Path(url.removeprefix(SQLITE)) if url.startswith(SQLITE) else None


def _migrate_for_real(env: Mapping[str, str], cwd: Path) -> None:
    argv = [sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"]
    subprocess.run(argv, cwd=cwd, env=dict(env), check=True)
