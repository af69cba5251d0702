"""gunicorn.conf.py as gunicorn itself reads it (`--print-config`, in a real process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def config(**env: str) -> dict[str, str]:
    gunicorn = Path(sys.executable).parent / "gunicorn"
    done = subprocess.run(
        [str(gunicorn), "-c", "gunicorn.conf.py", "--print-config", "taskhoster_site.wsgi"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
        check=True,
    )  # fmt: skip
    pairs = (line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return {name.strip(): value.strip() for name, value in pairs}


def test_the_control_socket_is_this_installations_own_under_var(tmp_path):
    assert config(TASKHOSTER_VAR_DIR=str(tmp_path))["control_socket"] == str(
        tmp_path / "gunicorn.ctl"
    )
    # a relative var/ is the project's (as settings.VAR_DIR)
    assert config(TASKHOSTER_VAR_DIR="var")["control_socket"] == str(ROOT / "var" / "gunicorn.ctl")
