"""Fuzz the store's name validation and path building (queues/store/paths.py).

Contract: validate_host/queue/task_id return the name unchanged or raise the store's documented
errors (InvalidName, NotFound). For every accepted (host, queue, id), every path built from them
stays under its root: os.path.commonpath([root, realpath(p)]) == root, for the joined task path,
for archive_dir, and for the directories QueueDirs really opens on disk (read back through
/proc/self/fd). task_id_of and key_file only ever name safe files.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import _setup  # noqa: F401
import atheris

with atheris.instrument_imports(include=["queues.store.paths"]):
    from queues.store import paths

from queues.store.errors import InvalidName, NotFound

# fuzz/run.py passes a scratch directory and removes it afterwards (libFuzzer exits directly)
WORK = Path(os.environ.get("FUZZ_WORKDIR") or tempfile.mkdtemp(prefix="fuzz-names-")).resolve()
ITEMS, LOGS = WORK / "items", WORK / "logs"
ITEMS.mkdir(parents=True)
ROOT_FD = paths.open_root(ITEMS)
_KEY = re.compile(r"[0-9a-f]{32}\.json")


def under(root: Path, path: str | Path) -> bool:
    return os.path.commonpath([str(root), os.path.realpath(path)]) == str(root)


def accepted(check, name: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        got = check(name)
    except (InvalidName, NotFound):
        return False
    if got != name:
        raise AssertionError(f"{check.__name__} changed {name!r} to {got!r}")
    return True


# pieces of names, allowed and hostile: dots, slashes, NUL, newline, upper case, look-alikes
_PIECES = [*"abz09-_.", "..", "/", "\\", "\x00", "\n", "A", "\u0430", "\u2024", "%2f", "\u0131"]


def text(fdp: atheris.FuzzedDataProvider) -> str:
    mode = fdp.ConsumeIntInRange(0, 2)
    n = fdp.ConsumeIntInRange(0, 300 if mode else 80)
    if mode == 0:  # built from pieces, so valid and nearly-valid names are common
        return "".join(fdp.PickValueInList(_PIECES) for _ in range(n))
    if mode == 1:
        return fdp.ConsumeBytes(n).decode("latin-1")
    return fdp.ConsumeUnicodeNoSurrogates(n)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    host, queue, task_id, other = text(fdp), text(fdp), text(fdp), text(fdp)
    ok_host = accepted(paths.validate_host, host)
    ok_queue = accepted(paths.validate_queue, queue)
    ok_id = accepted(paths.validate_task_id, task_id)

    found = paths.task_id_of(other)
    if found is not None and (
        not accepted(paths.validate_task_id, found) or paths.task_file(found) != other
    ):
        raise AssertionError(f"task_id_of({other!r}) = {found!r}")
    if not _KEY.fullmatch(paths.key_file(other or None, host)):
        raise AssertionError("key_file named an unsafe file")

    if not (ok_host and ok_queue):
        return
    for state in paths.STATE_DIRS:
        if ok_id and not under(ITEMS, ITEMS / host / queue / state / paths.task_file(task_id)):
            raise AssertionError(f"task path escapes: {host!r}/{queue!r}/{task_id!r}")
    if ok_id and not under(paths.archive_root(LOGS), paths.archive_dir(LOGS, host, queue, task_id)):
        raise AssertionError(f"archive path escapes: {host!r}/{queue!r}/{task_id!r}")
    qd = paths.QueueDirs(ROOT_FD, host, queue, create=True)
    qd.users += 1  # this harness opened the queue and holds it itself (no QueueCore here)
    try:
        for name in paths.QUEUE_DIRS:
            real = os.readlink(qd.proc_path(name))
            if not under(ITEMS, real) or os.path.basename(real) != name:
                raise AssertionError(f"opened {real} for {host!r}/{queue!r}/{name}")
    finally:
        qd.close()
        shutil.rmtree(ITEMS / host)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
