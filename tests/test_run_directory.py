"""The chaos run's and the soak's temporary directory: a passed run leaves nothing behind, not
even its server's figures in /dev/shm; a failed one keeps both for the write-up."""

import argparse
import os
import shutil
from pathlib import Path

import pytest

from chaos.run import run_in_its_directory
from queues.metrics import multiproc

pytestmark = pytest.mark.skipif(
    not multiproc.MEMORY.is_dir(), reason=f"no {multiproc.MEMORY} on this machine"
)


def _server_figures(found: list[Path], code: int):
    """A run whose server keeps its figures on the default place, as `manage.py serve` does."""

    def run(args: argparse.Namespace, run_dir: Path) -> int:
        before = os.environ.pop(multiproc.CHOSEN, None)  # the tests' own setting: not the default
        try:
            where = multiproc.prepare(run_dir / "var", "web")
        finally:
            if before is not None:
                os.environ[multiproc.CHOSEN] = before
        (where / "counter_1.db").write_bytes(b"\0" * 8)
        found.extend([run_dir, where.parent])
        return code

    return run


def test_a_passed_run_removes_its_directory_and_its_figures_in_memory(monkeypatch):
    monkeypatch.setenv(multiproc.ENV, os.environ.get(multiproc.ENV, ""))  # prepare sets it
    found: list[Path] = []
    code = run_in_its_directory(
        _server_figures(found, 0), argparse.Namespace(dir=None), prefix="t-"
    )
    run_dir, figures = found
    assert code == 0
    assert figures.parent == multiproc.MEMORY  # the default place, outside the run's directory
    assert not run_dir.exists() and not figures.exists()


def test_a_failed_run_keeps_its_directory_and_its_figures(monkeypatch, capsys):
    monkeypatch.setenv(multiproc.ENV, os.environ.get(multiproc.ENV, ""))
    found: list[Path] = []
    code = run_in_its_directory(
        _server_figures(found, 1), argparse.Namespace(dir=None), prefix="t-"
    )
    run_dir, figures = found
    try:
        assert code == 1
        assert (figures / "web" / "counter_1.db").is_file() and run_dir.is_dir()
        assert f"run directory kept: {run_dir}" in capsys.readouterr().out
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(figures, ignore_errors=True)
