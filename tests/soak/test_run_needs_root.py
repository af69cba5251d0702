"""`python -m soak.run` where mounts are not permitted: one clear line, and exit 0, unless CI
asks for the soak (TASKHOSTER_REQUIRE_SOAK=1), where it is a failure.

A user namespace (`unshare -U -r`) gives a process that looks like root but may not mount: the
soak's own probe mount is refused there, as on a machine without root.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def soak_without_mounts(**env: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed")
    probe = subprocess.run(["unshare", "-U", "-r", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not permitted here")
    return subprocess.run(
        ["unshare", "-U", "-r", sys.executable, "-m", "soak.run", "--quick"],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def test_without_mount_rights_the_soak_says_so_in_one_line_and_passes():
    done = soak_without_mounts(TASKHOSTER_REQUIRE_SOAK="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "soak: needs root for tmpfs mounts; skipped\n"


def test_without_mount_rights_ci_requiring_the_soak_fails():
    done = soak_without_mounts(TASKHOSTER_REQUIRE_SOAK="1")
    assert done.returncode == 2
    assert done.stdout.startswith("soak: needs root for tmpfs mounts (")
    assert len(done.stdout.splitlines()) == 1
