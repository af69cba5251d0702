"""Simulated power loss (powerloss.py's model) after every step of a batch post and a batch
finish, and of a claim of several tasks, whose files share their directory fsyncs.

For each crash state: materialise it, open a fresh QueueStore, run one sweep, then check, task
by task, what test_power_loss checks for one: an acknowledged batch left every task in its new
state; an unacknowledged one left each task old or new, never torn (the tasks of one batch may
differ: nothing of it was acknowledged); one copy per task; and a surviving event line for a
task's transition means that task's new state is on disk.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from queues.store import PostEntry, QueueStore, Report, copies, files, spares, sweep_queue
from queues.store.errors import StoreError

from . import powerloss
from .test_power_loss import (
    CLAIM_AT,
    DONE_AT,
    FLUSHES,
    HOST,
    QUEUE,
    STATE_DIRS,
    T0,
    S,
    config,
    copies_on_disk,
    lines_follow,
    log_lines,
    project,
    raw_winner,
)

N = 3  # tasks per batch: every combination of their files' fates is a crash state
SAMPLE = int(os.environ.get("TASKHOSTER_POWERLOSS_SAMPLE", "300"))  # per crash point


def _post_many(st: QueueStore) -> list[str]:
    entries = [PostEntry(item={"n": i}, idempotency_key="k1" if i == 1 else None) for i in range(N)]
    return [p.task.id for p in st.post_many(HOST, QUEUE, entries, settings=S, posted_by="alice",
                                            now=T0)]  # fmt: skip


def _claim_many(st: QueueStore) -> list[str]:
    return [t.id for t in st.claim(HOST, QUEUE, settings=S, worker="box-1", max_tasks=N,
                                   now=CLAIM_AT)]  # fmt: skip


def _finish_many(st: QueueStore, ids: list[str]) -> list[str]:
    outcomes = ["result", "fail", "retry"]
    reports = [Report(task_id=t, attempt=1, outcome=o, result={"o": o})
               for t, o in zip(ids, outcomes, strict=True)]  # fmt: skip
    st.finish_many(HOST, QUEUE, reports, settings=S, worker="box-1", now=DONE_AT)
    return ids


@dataclass(frozen=True)
class BatchOp:
    setup: tuple[str, ...]
    run: Callable[[QueueStore, list[str]], list[str]]
    events: tuple[str, ...]  # the event each task's transition logs
    check_at: int
    promised: bool = True  # False: not flushed, an acknowledgement promises nothing (a claim)


def _post_lone(st: QueueStore) -> list[str]:
    return [
        st.post(HOST, QUEUE, {"n": i}, settings=S, posted_by="alice", now=T0).task.id
        for i in range(N)
    ]


def _post_many_unkeyed(st: QueueStore) -> list[str]:
    entries = [PostEntry(item={"n": i}) for i in range(N)]
    return [p.task.id for p in st.post_many(HOST, QUEUE, entries, settings=S, posted_by="alice",
                                            now=T0)]  # fmt: skip


SETUP = {
    "post": lambda st, ids: _post_many(st),
    "claim": lambda st, ids: _claim_many(st),
    # a first round finished: its processing/ records retired into spare/ (syncfs)
    "finish": lambda st, ids: _finish_many(st, ids) and None,
    "post_lone": lambda st, ids: _post_lone(st),  # fresh inodes: the spares stay
}
RECYCLED = ("post", "claim", "finish")  # a queue whose spares hold other tasks' old records
OPS = {
    "post_many": BatchOp((), lambda st, ids: _post_many(st), ("posted",), T0),
    "claim_many": BatchOp(
        ("post",), lambda st, ids: _claim_many(st), ("claimed",), CLAIM_AT, promised=False
    ),
    "finish_many": BatchOp(
        ("post", "claim"), _finish_many, ("result", "failed", "requeue"), DONE_AT
    ),
    # under syncfs these write into spares that last held other tasks' records
    "post_many_recycled": BatchOp(
        RECYCLED, lambda st, ids: _post_many_unkeyed(st), ("posted",), DONE_AT
    ),
    "finish_many_recycled": BatchOp(
        (*RECYCLED, "post_lone", "claim"), _finish_many, ("result", "failed", "requeue"), DONE_AT
    ),
}


def explore(
    tmp: Path,
    name: str,
    *,
    sample: int = SAMPLE,
    flush: str = "fsync",
    crash_root: Path | None = None,
) -> tuple[int, int, list[str]]:
    op = OPS[name]
    base = tmp / "recorded"
    st = QueueStore(config(base, fsync=True, flush=flush))
    st.create_queue(HOST, QUEUE)
    ids: list[str] = []
    for step in op.setup:
        ids = SETUP[step](st, ids) or ids
    old = {t: project(st.read(HOST, QUEUE, t).to_record()) for t in ids}
    st.close()
    queue_dir = base / "items" / HOST / QUEUE
    known = {p.stem for d in STATE_DIRS for p in (queue_dir / d).glob("*.json")}
    os.sync()  # the setup is the durable starting point
    before = log_lines(base)
    st = QueueStore(config(base, fsync=True, flush=flush))
    trace, got = powerloss.record(base, lambda: op.run(st, ids))
    st.close()
    ids = list(got)  # type: ignore[arg-type]
    new = {t: project(raw_winner(copies_on_disk(base, t))) for t in ids}
    old = {t: old.get(t) for t in ids}
    logged_before = {t: _logged(before, t, op) for t in ids}

    states = checked = 0
    violations: list[str] = []
    rng = random.Random(name)
    by_point: dict[int, list[powerloss.CrashState]] = {}
    for state in powerloss.crash_states(trace, rng):
        by_point.setdefault(state.k, []).append(state)
    for found in by_point.values():
        states += len(found)
        if sample and len(found) > sample:
            found = rng.sample(found, sample)
        for state in found:
            dest = (crash_root or tmp) / "crash"
            powerloss.materialise(trace, state, dest)
            try:
                follow = lines_follow(op.promised, flush, state.acknowledged)
                problem = check(dest, op, ids, old, new, logged_before, state.acknowledged,
                                lines_follow=follow, known=known)  # fmt: skip
            except Exception as exc:  # any error while recovering is a violation too
                problem = f"recovery raised {exc!r}"
            shutil.rmtree(dest)
            checked += 1
            if problem:
                violations.append(f"{name}: {state.note}: {problem}")
    return states, checked, violations


def another_task_s_record(root: Path) -> str | None:
    """A task file that holds another task's whole record: what a spare named before its new
    bytes were flushed would show (data before names, store.md, fourth version). A torn or
    empty file is the sweep's to quarantine; a stale record under a wrong name is never right."""
    queue_dir = root / "items" / HOST / QUEUE
    for d in STATE_DIRS:
        for path in (queue_dir / d).glob("*.json") if (queue_dir / d).is_dir() else []:
            try:
                record = orjson.loads(path.read_bytes())
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("id") not in (None, path.stem):
                return f"{d}/{path.name} holds the record of {record.get('id')}"
    return None


def _logged(lines: list[dict[str, Any]], task_id: str, op: BatchOp) -> int:
    return sum(1 for e in lines if e["id"] == task_id and e["event"] in op.events)


def check(
    root: Path,
    op: BatchOp,
    ids: list[str],
    old: dict[str, Any],
    new: dict[str, Any],
    before: dict[str, int],
    acknowledged: bool,
    *,
    lines_follow: bool = True,
    known: set[str] | None = None,
) -> str | None:
    """`known`: the tasks on disk before the operation, besides its own (left unchecked)."""
    lines = log_lines(root)
    if stranger := another_task_s_record(root):
        return stranger
    for t in ids:
        if (
            lines_follow
            and _logged(lines, t, op) > before[t]
            and project(raw_winner(copies_on_disk(root, t))) != new[t]
        ):
            return f"the log has {t}'s transition but the disk holds its old state"
    store = QueueStore(config(root, fsync=False))
    try:
        sweep_queue(store, HOST, QUEUE, S, now=op.check_at)
    except StoreError:
        pass  # no queue directory survived: nothing to sweep
    finally:
        store.close()
    queue_dir = root / "items" / HOST / QUEUE
    others = [p.name for d in STATE_DIRS if (queue_dir / d).is_dir()
              for p in (queue_dir / d).glob("*.json")
              if p.stem not in ids and p.stem not in (known or set())]  # fmt: skip
    if others:
        return f"unexpected tasks {others}"
    for t in ids:
        found = copies_on_disk(root, t)
        if len(found) > 1:
            return f"{t}: {len(found)} copies after the sweep: {sorted(found)}"
        state = project(raw_winner(found)) if found else None
        if found and state is None:
            return f"{t}: the only copy is corrupt"
        if acknowledged and op.promised and state != new[t]:
            return f"{t}: acknowledged, but the state is {state}, not {new[t]}"
        if state not in (old[t], new[t]):
            return f"{t}: torn: {state} is neither {old[t]} nor {new[t]}"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("flush", FLUSHES)
@pytest.mark.parametrize("name", OPS)
def test_power_loss_in_a_batch(tmp_path: Path, crash_root: Path, name: str, flush: str) -> None:
    states, checked, violations = explore(tmp_path, name, flush=flush, crash_root=crash_root)
    print(f"{name} ({flush}): {states} states, {checked} checked, {len(violations)} violations")
    assert checked > 0
    assert violations == []


def _flush_nothing(self: files.DirSyncs) -> None:
    self._owed.clear()


def _temps_without_fsync(writes: list[tuple[int, bytes]], *, fsync: bool) -> list[str]:
    return ORIGINAL_WRITE_TEMPS(writes, fsync=False)


def _commit_many_retiring_first(qd: Any, changes: Any, *, fsync: Any, **kw: Any) -> Any:
    copies.retire(qd, ORIGINAL_COMMIT_MANY(qd, changes, fsync=fsync, **kw), fsync=fsync)
    return []


ORIGINAL_WRITE_TEMPS = files.write_temps
ORIGINAL_COMMIT_MANY = copies.commit_many
# planted bugs (in this process only): each must be caught, or these tests cannot fail
MUTANTS = {
    "a batch that never fsyncs its directories": (files.DirSyncs, "flush", _flush_nothing,
                                                  "post_many"),
    "a batch that does not fsync its files": (files, "write_temps", _temps_without_fsync,
                                              "finish_many"),
    "a batch that retires its sources before it is flushed": (
        copies, "commit_many", _commit_many_retiring_first, "finish_many"),
    "spares renamed before their data is flushed": (
        spares, "flush_data", lambda fsync: None, "post_many_recycled"),
    "spares renamed before their data is flushed, in a finish": (
        spares, "flush_data", lambda fsync: None, "finish_many_recycled"),
}  # fmt: skip
# Under syncfs a batch's writes defer to the one flush of its lines (files.deferred): they have
# no flushes of their own to leave out; under fsync a batch's records are flushed before
# commit_many returns
NOT_A_BUG = {
    "syncfs": {
        "a batch that never fsyncs its directories",
        "a batch that does not fsync its files",
    },
    "fsync": {
        "a batch that retires its sources before it is flushed",
        "spares renamed before their data is flushed",  # per-file fsync uses no spares
        "spares renamed before their data is flushed, in a finish",
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("flush", FLUSHES)
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_power_loss_in_a_batch_catches_planted_bugs(
    tmp_path: Path, crash_root: Path, monkeypatch, mutant: str, flush: str
):
    owner, attr, plant, name = MUTANTS[mutant]
    if mutant in NOT_A_BUG[flush]:
        pytest.skip(f"no bug under {flush}")
    monkeypatch.setattr(owner, attr, plant)
    _, _, violations = explore(tmp_path, name, flush=flush, crash_root=crash_root)
    print(f"{mutant} ({flush}): {len(violations)} violations, e.g. {violations[:1]}")
    assert violations
