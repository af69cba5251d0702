"""deploy/systemd/: the three production processes' unit files say what the README says (restart
on failure, a stop longer than gunicorn's graceful_timeout, the environment file) and start
commands that exist; systemd-analyze verifies them when the machine has it."""

from __future__ import annotations

import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parent.parent
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
CHECKOUT = "/srv/taskhoster"  # where the unit files expect the checkout
GRACEFUL_TIMEOUT = runpy.run_path(str(ROOT / "gunicorn.conf.py"))["graceful_timeout"]


def sections(unit: Path) -> dict[str, dict[str, str]]:
    """A unit file's sections and keys (a repeated key: its last value, as systemd's)."""
    found: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for raw in unit.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = found.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{unit.name}: {line!r} before any section"
        key, sep, value = line.partition("=")
        assert sep, f"{unit.name}: {line!r} is not key=value"
        current[key.strip()] = value.strip()
    return found


def test_there_is_one_unit_for_each_production_process():
    assert [unit.name for unit in UNITS] == [
        "taskhoster-ingest.service",
        "taskhoster-sweep.service",
        "taskhoster-web.service",
    ]


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_a_unit_restarts_on_failure_and_outwaits_the_graceful_timeout(unit):
    service = sections(unit)["Service"]
    assert service["Restart"] == "on-failure"
    assert float(service["RestartSec"]) > 0
    assert service["KillMode"] in ("mixed", "control-group")
    assert float(service["TimeoutStopSec"]) > GRACEFUL_TIMEOUT
    assert service["EnvironmentFile"] == "/etc/taskhoster/env"
    assert service["WorkingDirectory"] == CHECKOUT
    assert sections(unit)["Install"]["WantedBy"] == "multi-user.target"


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_a_unit_starts_a_real_command(unit):
    argv = sections(unit)["Service"]["ExecStart"].split()
    assert argv[0] == f"{CHECKOUT}/.venv/bin/python"
    if argv[1:3] == ["-m", "gunicorn"]:
        assert argv[3:] == [
            "-c",
            f"{CHECKOUT}/gunicorn.conf.py",
            "taskhoster_site.wsgi:application",
        ]
        return
    assert argv[1] == f"{CHECKOUT}/manage.py"
    assert argv[2] in get_commands()
    # the arguments parse: the command's own parser accepts them
    help_run = subprocess.run(
        [sys.executable, "manage.py", argv[2], "--help"], cwd=ROOT, capture_output=True, text=True
    )
    for option in (arg for arg in argv[3:] if arg.startswith("--")):
        assert option in help_run.stdout, f"{unit.name}: {argv[2]} has no {option}"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_the_units(tmp_path):
    """Verified as installed on this checkout: the paths pointed here, so the interpreter and
    the files it names exist; any warning (an unknown key, a typo) fails the test."""
    units = tmp_path / "units"
    units.mkdir()
    for unit in UNITS:
        (units / unit.name).write_text(unit.read_text().replace(CHECKOUT, str(ROOT)))
    verify = subprocess.run(
        ["systemd-analyze", "verify", *sorted(str(path) for path in units.iterdir())],
        capture_output=True, text=True,
    )  # fmt: skip
    assert verify.returncode == 0 and verify.stdout + verify.stderr == ""
