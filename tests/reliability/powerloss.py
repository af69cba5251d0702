"""Simulated power loss, ALICE-style: record what one store operation does to the disk, then
build every on-disk state a power cut could leave and check each one.

Recording
---------
`Recorder` replaces `queues.store.files.FAULTS` (the store's own test hook, called before every
disk-changing system call). The real calls still run on a real tmp directory. At every hook call
the recorder snapshots the tree (directory entries by inode, file contents by inode) and, for an
fsync, reads the descriptor being synced from the `_call` frame. It keeps every inode it has seen
open, so an unlinked inode's number is never reused within one recording. The difference between
two snapshots is what the system call in between did, including calls that bypass the hook (a
temp file's `discard`), so nothing the store does is invisible to the model.

The model ("lose what was not fsynced")
---------------------------------------
Start: the tree before the operation is durable. The recording is a list of steps; crash point
k means steps 1..k-1 completed (k = n+1: the operation returned, i.e. it was acknowledged).

* Directory operations. Each step's entry changes become operations on entries (dir, name):
  create (open O_CREAT, mkdir, link), unlink, and rename. A rename (a step of kind "rename" that
  moves one inode from one entry to another) is ONE atomic operation on both entries: all
  journaling file systems ALICE tested keep rename atomic. Everything else is one operation per
  entry, so a link and the unlink of its temp name persist independently.
* Persistence of a directory operation. It is certainly on disk after an fsync of its directory
  that ran after it; for a rename that is the DESTINATION directory only (fsync of the source
  directory is not assumed to carry a cross-directory rename). Until then it may be absent, each
  operation independently, subject to one ordering rule: the operations on one entry persist in
  order (a prefix of that entry's history), so a rename can't persist without the creation of its
  source name, and a replace can't persist without what it replaced. A directory whose own mkdir
  did not persist takes everything under it with it.
* syncfs. A step of kind "syncfs" (files.syncfs, the store's group commit) is a barrier over the
  whole file system: every directory operation and every byte written before it is on disk once
  it has returned, as if each directory and each file had been fsynced.
* A rename over a file carries its source's data. ext4 (auto_da_alloc, the default) writes the
  blocks of a file renamed over another before the commit that holds the rename, and
  data=ordered keeps them in order: once such a rename is on disk, so is the data its inode had
  when it was renamed. The claim relies on this: it replaces processing/'s record with the
  leased one and flushes nothing (store.md, fourth version). A rename to a free name carries
  nothing (delayed allocation: a crash can leave the name on an empty file).
* Spare inodes written over (queues.store.spares). A file whose content is no longer an
  extension of its durable content was written over since its last flush: it may hold its old
  bytes, its new ones, or the new ones over the first half and the old after them (torn).
* File data. Otherwise the store only appends to a file or writes a fresh one. An inode's data is
  durable up to its content at its last fsync/fdatasync; the rest (the unsynced tail) may be
  lost from any byte on. "Any prefix" is explored by representative cut points: 0, 1, half,
  all-but-one and all of the tail (the classes that matter for JSON and for log lines: empty,
  torn, whole).

The crash states at point k are all combinations of (a subset of the unforced directory
operations closed under the ordering rule) x (a cut point for each reachable file with an
unsynced tail). When a point has more than `MAX_SUBSET_BITS` unforced operations, subsets are
sampled; the count says so.
"""

from __future__ import annotations

import itertools
import os
import random
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from queues.store import files

MAX_SUBSET_BITS = 12
Entry = tuple[int, str]  # (directory inode, name)


@dataclass
class Snapshot:
    entries: dict[Entry, int]  # (dir inode, name) -> inode
    dirs: set[int]  # inodes that are directories
    data: dict[int, bytes]  # file inode -> content


@dataclass
class Step:
    kind: str
    before: Snapshot
    synced: int | None = None  # inode given to fsync/fdatasync in this step
    barrier: bool = False  # a syncfs: everything written before this step is durable after it


@dataclass
class DirOp:
    step: int  # 1-based index of the step whose system call did it
    changes: dict[Entry, int | None]  # entry -> inode after the op (None: removed)
    forced_by: set[int]  # directory inodes whose fsync makes it certain
    carries: int | None = None  # a rename over a file: the inode whose data it carries


@dataclass
class Trace:
    root: Path
    root_ino: int
    steps: list[Step]
    final: Snapshot
    ops: list[DirOp] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.steps)

    def kinds(self) -> list[str]:
        return [s.kind for s in self.steps]

    def snapshot_at(self, k: int) -> Snapshot:
        """The volatile (page cache) state at crash point k: steps 1..k-1 done."""
        return self.final if k > self.n else self.steps[k - 1].before


class Recorder(files.Faults):
    """Stands in for files.FAULTS: runs nothing itself, only snapshots the tree at every call."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.steps: list[Step] = []
        self._held: dict[int, int] = {}  # inode -> an open fd, so the inode number is not reused

    def step(self, kind: str) -> None:
        synced = None
        caller = sys._getframe(1)
        if kind in ("fsync", "fsync_dir") and caller.f_code.co_name == "_call":
            synced = os.fstat(caller.f_locals["args"][0]).st_ino
        self.steps.append(Step(kind, self.snapshot(), synced, barrier=kind == "syncfs"))
        super().step(kind)

    def snapshot(self) -> Snapshot:
        entries: dict[Entry, int] = {}
        dirs = {os.stat(self.root).st_ino}
        data: dict[int, bytes] = {}
        for top, subdirs, names in os.walk(self.root):
            top_ino = os.stat(top).st_ino
            for name in subdirs + names:
                st = os.lstat(os.path.join(top, name))
                entries[(top_ino, name)] = st.st_ino
                if stat.S_ISDIR(st.st_mode):
                    dirs.add(st.st_ino)
                elif stat.S_ISREG(st.st_mode):
                    if st.st_ino not in self._held:
                        path = os.path.join(top, name)
                        self._held[st.st_ino] = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                    fd = self._held[st.st_ino]
                    data[st.st_ino] = os.pread(fd, st.st_size + 1, 0)
        return Snapshot(entries, dirs, data)

    def close(self) -> None:
        for fd in self._held.values():
            os.close(fd)
        self._held = {}


def record(root: Path, run) -> tuple[Trace, object]:  # type: ignore[no-untyped-def]
    """Run `run()` (one store operation on a store under `root`) and record it."""
    rec = Recorder(root)
    saved, files.FAULTS = files.FAULTS, rec
    try:
        result = run()
        final = rec.snapshot()
    finally:
        files.FAULTS = saved
        rec.close()
    trace = Trace(root, os.stat(root).st_ino, rec.steps, final)
    trace.ops = _dir_ops(trace)
    return trace, result


def _dir_ops(trace: Trace) -> list[DirOp]:
    ops = []
    shots = [s.before for s in trace.steps] + [trace.final]
    for i, step in enumerate(trace.steps):
        a, b = shots[i], shots[i + 1]
        changed = {
            e: b.entries.get(e)
            for e in set(a.entries) | set(b.entries)
            if a.entries.get(e) != b.entries.get(e)
        }
        paired: set[Entry] = set()
        if step.kind == "rename":
            for src, ino in list(changed.items()):
                if ino is not None:
                    continue
                old = a.entries[src]
                dst = [e for e, new in changed.items() if new == old and e not in paired]
                if dst:
                    paired |= {src, dst[0]}
                    over = a.entries.get(dst[0]) is not None
                    ops.append(
                        DirOp(i + 1, {src: None, dst[0]: old}, {dst[0][0]}, old if over else None)
                    )
        for e in changed:
            if e not in paired:
                ops.append(DirOp(i + 1, {e: changed[e]}, {e[0]}))
    return ops


def durable_data(trace: Trace, ino: int, k: int, base: Snapshot) -> bytes:
    """The content an inode certainly has at crash point k: as of its last fsync before k."""
    synced = base.data.get(ino, b"")
    for j, step in enumerate(trace.steps[: k - 1], start=1):
        if step.synced == ino or step.barrier:
            synced = step.before.data.get(ino, b"")
    return synced


@dataclass
class CrashState:
    k: int
    acknowledged: bool
    entries: dict[Entry, int]
    dirs: set[int]
    data: dict[int, bytes]
    note: str


def crash_states(trace: Trace, rng: random.Random, sample: int = 0) -> Iterator[CrashState]:
    """Every crash state the model allows, for every crash point (sampled when huge)."""
    base = trace.steps[0].before if trace.steps else trace.final
    for k in range(1, trace.n + 2):
        volatile = trace.snapshot_at(k)
        done = [op for op in trace.ops if op.step < k]
        forced = set()
        for j, step in enumerate(trace.steps[: k - 1], start=1):
            if step.barrier:
                forced |= {id(op) for op in done if op.step < j}
            elif step.synced is not None:
                forced |= {id(op) for op in done if op.step < j and step.synced in op.forced_by}
        free = [op for op in done if id(op) not in forced]
        for chosen in _subsets(done, free, rng, sample):
            entries = dict(base.entries)
            for op in done:
                if id(op) in forced or id(op) in chosen:
                    for e, ino in op.changes.items():
                        if ino is None:
                            entries.pop(e, None)
                        else:
                            entries[e] = ino
            where = trace.kinds()[k - 1] if k <= trace.n else "ack"
            kept = sorted(trace.ops.index(o) for o in done if id(o) in chosen)
            free_ix = sorted(trace.ops.index(o) for o in free)
            reachable = _reachable(trace.root_ino, entries, volatile.dirs | base.dirs)
            carried = {
                op.carries: trace.steps[op.step - 1].before.data.get(op.carries, b"")
                for op in done
                if op.carries is not None and (id(op) in forced or id(op) in chosen)
            }
            tails = []
            for ino in sorted(reachable):
                full = volatile.data.get(ino, base.data.get(ino, b""))
                sure = durable_data(trace, ino, k, base)
                if len(carried.get(ino, b"")) > len(sure):
                    sure = carried[ino]
                if not full.startswith(sure):  # a spare written over since its last flush
                    half = len(full) // 2
                    torn = full[:half] + sure[half : len(full)]
                    tails.append([(ino, v) for v in dict.fromkeys((sure, torn, full))])
                    continue
                cut = len(full) - len(sure)
                cuts = sorted({0, min(1, cut), cut // 2, max(cut - 1, 0), cut})
                tails.append([(ino, full[: len(sure) + c]) for c in cuts])
            for combo in itertools.product(*tails):
                yield CrashState(
                    k,
                    k > trace.n,
                    entries,
                    volatile.dirs | base.dirs,
                    dict(combo),
                    f"crash point {k}/{trace.n + 1} {where}, unsynced ops kept {kept} of {free_ix}",
                )


def _subsets(
    done: list[DirOp], free: list[DirOp], rng: random.Random, sample: int
) -> Iterator[set[int]]:
    """Subsets of the free ops that keep every entry's history a prefix."""
    history: dict[Entry, list[int]] = {}
    for op in done:
        for e in op.changes:
            history.setdefault(e, []).append(id(op))
    free_ids = [id(op) for op in free]
    forced_ids = {id(op) for op in done} - set(free_ids)

    def closed(chosen: set[int]) -> bool:
        kept = chosen | forced_ids
        for ids in history.values():
            flags = [i in kept for i in ids]
            if any(later and not earlier for earlier, later in itertools.pairwise(flags)):
                return False
        return True

    if len(free_ids) <= MAX_SUBSET_BITS and not sample:
        masks: Iterator[int] = iter(range(1 << len(free_ids)))
    else:
        count = sample or (1 << MAX_SUBSET_BITS)
        masks = iter(
            {0, (1 << len(free_ids)) - 1} | {rng.getrandbits(len(free_ids)) for _ in range(count)}
        )
    for mask in masks:
        chosen = {i for b, i in enumerate(free_ids) if mask >> b & 1}
        if closed(chosen):
            yield chosen


def _reachable(root: int, entries: dict[Entry, int], dirs: set[int]) -> set[int]:
    """File inodes reachable from the root through persisted entries."""
    found, todo, seen = set(), [root], {root}
    children: dict[int, list[int]] = {}
    for (parent, _), ino in entries.items():
        children.setdefault(parent, []).append(ino)
    while todo:
        for ino in children.get(todo.pop(), []):
            if ino in dirs:
                if ino not in seen:
                    seen.add(ino)
                    todo.append(ino)
            else:
                found.add(ino)
    return found


def materialise(trace: Trace, state: CrashState, dest: Path) -> None:
    """Write the crash state as a real directory tree under `dest`."""
    children: dict[int, list[tuple[str, int]]] = {}
    for (parent, name), ino in state.entries.items():
        children.setdefault(parent, []).append((name, ino))

    def build(dir_ino: int, path: Path) -> None:
        path.mkdir(exist_ok=True)
        for name, ino in sorted(children.get(dir_ino, [])):
            if ino in state.dirs:
                build(ino, path / name)
            else:
                (path / name).write_bytes(state.data.get(ino, b""))

    build(trace.root_ino, dest)
