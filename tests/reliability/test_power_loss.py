"""Simulated power loss after every step of every store operation (the model: powerloss.py).

For each crash state: materialise it, open a fresh QueueStore, run one sweep, then check
- durability: an acknowledged operation's new state survived;
- atomicity: an unacknowledged one left the old or the new state, never a torn or lost task;
- one copy per task after the sweep;
- the event log: every complete line parses, and a surviving line for the operation's event
  means its new state is on disk (a line is never written for a transition that did not happen),
  except where the operation was not flushed before that line: under syncfs one flush after the
  line covers records and line alike (store.md, fourth version), so a line may outlive the record
  of an operation never acknowledged; and a claim is never flushed, so its line may outlive it.
- a claim promises nothing a crash can break: acknowledged or not, the task is left as it was
  or claimed (a run again, at-least-once), never torn or lost.

Every state is checked by default (about 3,100 in 10 s); `TASKHOSTER_POWERLOSS_SAMPLE=N` checks
at most N per crash point, should a larger operation ever make that too slow for `make test`.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from queues.store import QueueSettings, QueueStore, StoreConfig, copies, files, sweep_queue
from queues.store.errors import LeaseLost, StoreError
from queues.store.eventlog import EventLog

from . import powerloss

HOST, QUEUE = "task.example.com", "resize"
T0 = 1_751_500_000_000
S = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600, retain_seconds=3600)
W = {"settings": S, "worker": "box-1", "attempt": 1}
CLAIM_AT, DONE_AT = T0 + 1_000, T0 + 2_000
LAPSE_AT, CLEAN_AT = CLAIM_AT + 3_601_000, DONE_AT + 3_601_000
STATE_DIRS = ("pending", "processing", "done")
# per crash point, at most this many crash states are checked (0: all of them)
SAMPLE = int(os.environ.get("TASKHOSTER_POWERLOSS_SAMPLE", "0"))


def _post(st: QueueStore, tid: str | None, **kw: Any) -> Any:
    return st.post(HOST, QUEUE, {"n": 1}, settings=S, posted_by="alice", now=T0, **kw).task


SETUP: dict[str, Callable[[QueueStore, str | None], Any]] = {
    "post": _post,
    "claim": lambda st, tid: st.claim(HOST, QUEUE, settings=S, worker="box-1", now=CLAIM_AT)[0],
    "finish": lambda st, tid: st.finish(HOST, QUEUE, tid, result={"r": 1}, now=DONE_AT, **W),
}


@dataclass(frozen=True)
class Op:
    setup: tuple[str, ...]
    run: Callable[[QueueStore, str | None], Any]
    event: str
    check_at: int  # the recovery sweep's clock
    fresh_queue: bool = False
    promised: bool = True  # False: not flushed, so an acknowledgement promises nothing (a claim)


OPS = {
    "post": Op((), _post, "posted", T0),
    "post_keyed": Op((), lambda st, t: _post(st, t, idempotency_key="k1"), "posted", T0),
    "post_new_queue": Op((), _post, "posted", T0, fresh_queue=True),
    "claim": Op(("post",), SETUP["claim"], "claimed", CLAIM_AT, promised=False),
    "progress": Op(
        ("post", "claim"),
        lambda st, t: st.progress(HOST, QUEUE, t, progress={"p": 1}, now=CLAIM_AT + 1, **W),
        "progress",
        CLAIM_AT + 1,
    ),
    "finish": Op(("post", "claim"), SETUP["finish"], "result", DONE_AT),
    "fail": Op(
        ("post", "claim"),
        lambda st, t: st.fail(HOST, QUEUE, t, result={"e": 1}, now=DONE_AT, **W),
        "failed",
        DONE_AT,
    ),
    "fail_retry": Op(
        ("post", "claim"),
        lambda st, t: st.fail(HOST, QUEUE, t, result={"e": 1}, retry=True, now=DONE_AT, **W),
        "requeue",
        DONE_AT,
    ),
    "cancel": Op(
        ("post",),
        lambda st, t: st.cancel(HOST, QUEUE, t, settings=S, now=CLAIM_AT),
        "cancelled",
        CLAIM_AT,
    ),
    "sweep_lapse": Op(
        ("post", "claim"),
        lambda st, t: sweep_queue(st, HOST, QUEUE, S, now=LAPSE_AT),
        "requeue",
        LAPSE_AT,
    ),
    "sweep_clean": Op(
        ("post", "claim", "finish"),
        lambda st, t: sweep_queue(st, HOST, QUEUE, S, now=CLEAN_AT),
        "cleaned",
        CLEAN_AT,
    ),
}


def project(record: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What a state is, without the bookkeeping (rev, updatedAt) a recovery may rewrite."""
    if record is None:
        return None
    keys = ("status", "attempts", "lease", "progress", "result", "error", "cancelRequested")
    return tuple(orjson.dumps(record.get(k)) for k in keys)


FLUSHES = ("fsync", "syncfs")  # StoreConfig.flush: each mode is explored


def config(root: Path, *, fsync: bool, flush: str = "fsync") -> StoreConfig:
    return StoreConfig(items_dir=root / "items", logs_dir=root / "logs", fsync=fsync, flush=flush)


def copies_on_disk(root: Path, tid: str) -> dict[str, bytes]:
    qdir = root / "items" / HOST / QUEUE
    return {d: p.read_bytes() for d in STATE_DIRS if (p := qdir / d / f"{tid}.json").is_file()}


def raw_winner(found: dict[str, bytes]) -> dict[str, Any] | None:
    best = None
    for data in found.values():
        try:
            rec = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if best is None or rec.get("rev", 0) > best.get("rev", 0):
            best = rec
    return best


def log_lines(root: Path) -> list[dict[str, Any]]:
    """Every complete line; a torn last line (no newline) is what a crash may leave."""
    lines = []
    for day in sorted((root / "logs" / "tasks").glob("*.jsonl")):
        data = day.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        lines += [orjson.loads(raw) for raw in complete.splitlines()]  # raises on a broken line
    return lines


@dataclass
class Outcome:
    states: int = 0  # crash states the model allows
    checked: int = 0  # of those, materialised and checked
    violations: list[str] = field(default_factory=list)
    doubled: int = 0  # checked states that held two copies of the task before the sweep


def explore(
    tmp: Path,
    name: str,
    *,
    sample: int = SAMPLE,
    fsync: bool = True,
    flush: str = "fsync",
    crash_root: Path | None = None,
) -> Outcome:
    """Record `name` once under `tmp`, then check its crash states (up to `sample` per crash
    point), each built under `crash_root` (default: `tmp`)."""
    op = OPS[name]
    base = tmp / "recorded"
    st = QueueStore(config(base, fsync=fsync, flush=flush))
    if not op.fresh_queue:
        st.create_queue(HOST, QUEUE)
    tid = None
    for step in op.setup:
        got = SETUP[step](st, tid)
        tid = tid or got.id
    old = project(st.read(HOST, QUEUE, tid).to_record()) if tid else None
    st.close()
    os.sync()  # the setup is the durable starting point
    before = log_lines(base)
    st = QueueStore(config(base, fsync=fsync, flush=flush))
    trace, result = powerloss.record(base, lambda: op.run(st, tid))
    st.close()
    tid = tid or result.id
    new = project(raw_winner(copies_on_disk(base, tid)))
    logged_before = sum(1 for e in before if e["id"] == tid and e["event"] == op.event)

    out = Outcome()
    rng = random.Random(name)
    by_point: dict[int, list[powerloss.CrashState]] = {}
    for state in powerloss.crash_states(trace, rng):
        by_point.setdefault(state.k, []).append(state)
    for states in by_point.values():
        out.states += len(states)
        if sample and len(states) > sample:
            states = rng.sample(states, sample)
        for state in states:
            dest = (crash_root or tmp) / "crash"
            powerloss.materialise(trace, state, dest)
            out.doubled += len(copies_on_disk(dest, tid)) > 1
            try:
                follow = lines_follow(op.promised, flush, state.acknowledged)
                problem = check(dest, op, tid, old, new, logged_before, state.acknowledged,
                                lines_follow=follow)  # fmt: skip
            except Exception as exc:  # any error while recovering is a violation too
                problem = f"recovery raised {exc!r}"
            shutil.rmtree(dest)
            out.checked += 1
            if problem:
                out.violations.append(f"{name}: {state.note}: {problem}")
    return out


def lines_follow(promised: bool, flush: str, acknowledged: bool) -> bool:
    """Whether a surviving line of the operation means its state is on disk: the records are
    flushed before the line under per-file fsync; under syncfs one flush covers both, so only
    once it is acknowledged; never for a claim, which is not flushed at all."""
    return promised and (acknowledged or flush == "fsync")


def check(
    root: Path,
    op: Op,
    tid: str,
    old: Any,
    new: Any,
    before: int,
    acknowledged: bool,
    *,
    lines_follow: bool = True,
) -> str | None:
    lines = log_lines(root)
    logged = sum(1 for e in lines if e["id"] == tid and e["event"] == op.event)
    raw = project(raw_winner(copies_on_disk(root, tid)))
    if lines_follow and logged > before and raw != new:
        return f"the log says {op.event} but the disk holds {raw}"
    store = QueueStore(config(root, fsync=False))
    try:
        sweep_queue(store, HOST, QUEUE, S, now=op.check_at)
    except StoreError:
        pass  # no queue directory survived: nothing to sweep
    finally:
        store.close()
    found = copies_on_disk(root, tid)
    others = [
        p.name
        for d in STATE_DIRS
        if (root / "items" / HOST / QUEUE / d).is_dir()
        for p in (root / "items" / HOST / QUEUE / d).glob("*.json")
        if p.stem != tid
    ]
    if others:
        return f"unexpected tasks {others}"
    if len(found) > 1:
        return f"{len(found)} copies after the sweep: {sorted(found)}"
    state = project(raw_winner(found)) if found else None
    if found and state is None:
        return "the only copy is corrupt"
    if acknowledged and op.promised and state != new:
        return f"acknowledged, but the state is {state}, not {new}"
    if state not in (old, new):
        return f"torn: {state} is neither {old} nor {new}"
    return None


@pytest.mark.parametrize("flush", FLUSHES)
@pytest.mark.parametrize("name", OPS)
def test_power_loss(tmp_path: Path, crash_root: Path, name: str, flush: str) -> None:
    outcome = explore(tmp_path, name, flush=flush, crash_root=crash_root)
    print(
        f"{name} ({flush}): {outcome.states} crash states, {outcome.checked} checked,"
        f" {len(outcome.violations)} violations"
    )
    assert outcome.checked > 0
    assert outcome.violations == []


def _commit_without_dir_fsync(dir_fd: int, temp: str, name: str, *, fsync: bool) -> None:
    files._call("rename", os.rename, temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _temp_without_fsync(dir_fd: int, data: bytes, *, fsync: bool) -> str:
    return ORIGINAL_WRITE_TEMP(dir_fd, data, fsync=False)


def _commit_unlinking_the_source_first(qd: Any, source: str, new: Any, *, fsync: Any) -> Any:
    target, name = new.status.directory, f"{new.id}.json"
    if target != source:
        files.unlink(qd.fd(source), name, fsync=fsync)
    ORIGINAL_COMMIT(qd, target, new, fsync=fsync)
    return []


def _commit_retiring_before_the_flush(qd: Any, source: str, new: Any, *, fsync: Any) -> Any:
    copies.retire(qd, ORIGINAL_COMMIT(qd, source, new, fsync=fsync), fsync=fsync)
    return []


def _append_without_flush(self: Any, day: Any, data: bytes, *, flush: bool = True) -> None:
    ORIGINAL_APPEND(self, day, data, flush=False)


ORIGINAL_WRITE_TEMP = files.write_temp
ORIGINAL_COMMIT = copies.commit
ORIGINAL_APPEND = EventLog._append
# planted bugs (in this process only): each must be caught, or this test cannot fail
MUTANTS = {
    "no fsync of the directory after a rename": (
        files, "commit_temp", _commit_without_dir_fsync, "post"),
    "no fsync of the file before its rename": (files, "write_temp", _temp_without_fsync, "finish"),
    "a move that unlinks the source first": (
        copies, "commit", _commit_unlinking_the_source_first, "finish"),
    "a move that retires its source before the change is flushed": (
        copies, "commit", _commit_retiring_before_the_flush, "finish"),
    "an event line whose flush is left out": (EventLog, "_append", _append_without_flush, "post"),
}  # fmt: skip


@pytest.mark.parametrize("flush", FLUSHES)
@pytest.mark.parametrize("name", ["finish", "fail_retry", "cancel", "sweep_lapse"])
def test_power_loss_keeps_moves_whose_source_unlink_was_lost(
    tmp_path: Path, crash_root: Path, name: str, flush: str
) -> None:
    """A move flushes only its destination: the model keeps crash states in which the unlink
    of the source is lost (two copies on disk), and each of them reconciles to one copy."""
    outcome = explore(tmp_path, name, flush=flush, crash_root=crash_root)
    print(f"{name} ({flush}): {outcome.doubled} of {outcome.checked} states held two copies")
    assert outcome.doubled > 0
    assert outcome.violations == []


# per-file fsync flushes each record before the line; under syncfs the writes defer to the one
# flush that closes the operation (files.deferred), so these steps have no flush of their own
SYNCFS_NOT_A_BUG = {
    "no fsync of the directory after a rename",
    "no fsync of the file before its rename",
}
# under per-file fsync every record is durable before commit returns
FSYNC_NOT_A_BUG = {
    "a move that retires its source before the change is flushed",
    "an event line whose flush is left out",  # each record is flushed before its line
}


@pytest.mark.parametrize("flush", FLUSHES)
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_power_loss_catches_planted_bugs(
    tmp_path: Path, crash_root: Path, monkeypatch: Any, mutant: str, flush: str
) -> None:
    if flush == "syncfs" and mutant in SYNCFS_NOT_A_BUG:
        pytest.skip("no bug under syncfs: the operation's one flush covers every step")
    if flush == "fsync" and mutant in FSYNC_NOT_A_BUG:
        pytest.skip("no bug under fsync: the destination is flushed before commit returns")
    owner, attr, plant, name = MUTANTS[mutant]
    monkeypatch.setattr(owner, attr, plant)
    outcome = explore(tmp_path, name, sample=0, flush=flush, crash_root=crash_root)
    found = outcome.violations
    print(f"{mutant} ({flush}): {len(found)} violations, e.g. {found[:1]}")
    assert outcome.violations


@pytest.mark.parametrize("flush", FLUSHES)
def test_fencing_holds_after_a_crash_that_lost_a_claim(
    tmp_path: Path, crash_root: Path, flush: str
) -> None:
    """A claim is not flushed, so a power cut may take it back after box-1 heard of it. In
    every crash state of the claim: once recovered (a sweep past its lease, as the lease pass
    would run), whoever claims the task next holds it, and box-1's report for the claim it
    heard of is refused unless box-1 holds the task still (its claim survived)."""
    base = tmp_path / "recorded"
    st = QueueStore(config(base, fsync=True, flush=flush))
    st.create_queue(HOST, QUEUE)
    tid = _post(st, None).id
    st.close()
    os.sync()
    st = QueueStore(config(base, fsync=True, flush=flush))
    trace, claimed = powerloss.record(
        base, lambda: st.claim(HOST, QUEUE, settings=S, worker="box-1", now=CLAIM_AT)
    )
    st.close()
    assert [t.id for t in claimed] == [tid]  # type: ignore[attr-defined]
    lost = refused = 0
    for state in powerloss.crash_states(trace, random.Random("fencing")):
        if not state.acknowledged:
            continue  # box-1 never heard of a claim: nothing to fence
        dest = crash_root / "crash"
        powerloss.materialise(trace, state, dest)
        store = QueueStore(config(dest, fsync=False))
        try:
            sweep_queue(store, HOST, QUEUE, S, now=LAPSE_AT)  # the lease pass, past the lease
            again = store.claim(HOST, QUEUE, settings=S, worker="box-2", now=LAPSE_AT + 1)
            assert [t.id for t in again] == [tid], state.note  # never lost: claimable again
            lost += again[0].attempts == 1  # box-1's claim was taken back by the power cut
            with pytest.raises(LeaseLost):
                store.finish(HOST, QUEUE, tid, result={"stale": 1}, now=LAPSE_AT + 2, **W)
            refused += 1
            done = store.finish(HOST, QUEUE, tid, settings=S, worker="box-2",
                                attempt=again[0].attempts, result={"r": 1},
                                now=LAPSE_AT + 3)  # fmt: skip
            assert done.task.status.value == "finished"
        finally:
            store.close()
            shutil.rmtree(dest)
    print(f"fencing ({flush}): {refused} acknowledged crash states, {lost} lost the claim")
    assert refused > 0 and lost > 0  # the model did take back acknowledged claims
