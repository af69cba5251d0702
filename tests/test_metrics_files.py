"""Where the server's figures are kept (queues/metrics/multiproc.py): a directory of this
user's own, tidied of the files of processes that are gone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from queues.metrics import multiproc


@pytest.fixture(autouse=True)
def own_environment(monkeypatch):
    monkeypatch.delenv(multiproc.ENV, raising=False)  # prepare() names it; undone after


def test_prepare_removes_the_files_of_dead_processes_and_keeps_live_ones(tmp_path, monkeypatch):
    monkeypatch.setenv(multiproc.CHOSEN, str(tmp_path / "figures"))
    where = multiproc.directory(tmp_path / "var", "web")
    where.mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = int(gone.stdout)
    for name in (f"counter_{dead}.db", f"gauge_livesum_{dead}.db", f"counter_{os.getppid()}.db",
                 "stray.txt"):  # fmt: skip
        (where / name).write_bytes(b"")
    assert multiproc.prepare(tmp_path / "var", "web") == where
    assert sorted(p.name for p in where.iterdir()) == [f"counter_{os.getppid()}.db"]
    assert os.environ[multiproc.ENV] == str(where)


def test_the_default_root_is_in_memory_one_per_installation(tmp_path, monkeypatch):
    monkeypatch.delenv(multiproc.CHOSEN, raising=False)
    if not multiproc.MEMORY.is_dir():
        pytest.skip("no /dev/shm here")
    one, other = multiproc.root(tmp_path / "a"), multiproc.root(tmp_path / "b")
    assert one.parent == multiproc.MEMORY and one != other
    assert multiproc.root(tmp_path / "a") == one


def test_a_root_that_is_a_link_is_refused(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "figures").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv(multiproc.CHOSEN, str(tmp_path / "figures"))
    with pytest.raises(PermissionError, match="not a directory of this user"):
        multiproc.prepare(tmp_path / "var", "web")


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_a_root_another_user_owns_is_refused(tmp_path, monkeypatch):
    theirs = tmp_path / "figures"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    monkeypatch.setenv(multiproc.CHOSEN, str(theirs))
    with pytest.raises(PermissionError, match="set TASKHOSTER_METRICS_DIR"):
        multiproc.prepare(tmp_path / "var", "web")


def test_a_relative_root_is_under_the_installations_var_directory(tmp_path, monkeypatch):
    """Wherever each program was started from (gunicorn's and the sweep's directories may
    differ), they name the same root; the suite's servers keep theirs in their own var/."""
    monkeypatch.setenv(multiproc.CHOSEN, "figures")
    monkeypatch.chdir(tmp_path)
    var = tmp_path / "site" / "var"
    assert multiproc.root(var) == var / "figures"
    assert multiproc.prepare(var, "sweep") == var / "figures" / "sweep"
    monkeypatch.setenv(multiproc.CHOSEN, str(tmp_path / "absolute"))
    assert multiproc.root(var) == tmp_path / "absolute"
