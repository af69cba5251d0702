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


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_the_first_runs_install_prints_nothing_of_ours(tmp_path):
    """`make run` on a fresh clone installs the project first: setuptools' "Editable
    installation" box (a warning of the build) is not for its user. The Makefile's own pip
    lines, run into a fresh virtual environment (the install without the dependencies),
    write no line but pip's own warnings about this machine's pip configuration."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", f"VENV={venv}", "venv"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    [upgrade] = [line for line in planned if "pip install" in line and "--upgrade pip" in line]
    [install] = [line for line in planned if "pip install" in line and " -e " in line]
    subprocess.run(upgrade, shell=True, cwd=ROOT, check=True, capture_output=True, timeout=300)
    done = subprocess.run(install + " --no-deps", shell=True, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    ours = [line for line in (done.stdout + done.stderr).splitlines()
            if line.strip() and not line.startswith("WARNING: ")]  # fmt: skip
    assert ours == [], "\n".join(ours)
