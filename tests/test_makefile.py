"""What the Makefile hands the programs it runs: bytecode caches are written even where the
machine's environment says not to (else every pytest worker rewrites every test module on each
pass, and every child process a test starts compiles taskhoster again)."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_a_program_make_runs_writes_bytecode_though_the_machine_says_not_to():
    probe = f"probe:; @{sys.executable} -c 'import sys; print(sys.flags.dont_write_bytecode)'"
    done = subprocess.run(
        ["make", "--no-print-directory", "-s", "--eval", probe, "probe"],
        cwd=ROOT, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "0", done.stdout + done.stderr
