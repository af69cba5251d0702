"""The durable-write order, read from the kernel's side with strace (not from the store's hook).

A child process posts, claims and finishes one task with fsync on, then posts, claims and
batch-finishes a batch of five, under `strace -f -y` (which prints the path behind every
descriptor). For each operation, the batches' included:
- every rename of a temp file onto a task name comes after an fsync of that temp file and
  before an fsync of its directory (fsync(file) < rename < fsync(dir));
- the claim's rename pending -> processing is followed by an fsync of processing/;
- every unlink of a task file from a state directory comes after an fsync of the directory the
  task was written to; the directory it left is not flushed (a lost unlink leaves a second copy,
  which the reconcile rules settle: store.md, third version).
A batch fsyncs each directory it touched once and the event log once (group commit within one
call), all before it returns. A child run with a planted bug (no directory fsync after a rename,
in a single write and in a batch's) must fail the same check.

A claim flushes nothing at all (store.md, fourth version): its segments hold no flush.

With `flush="syncfs"` the same child runs again: a syncfs() is a barrier over the whole file
system, so it counts as the fsync of every file and directory written before it; each operation
then makes no fsync at all, and a post, a finish or a batch finish writes its fresh files,
renames them, appends its lines and then makes its one syncfs (a keyed batch post still flushes
its keys and files first); a move's source goes only after that flush. A child with planted bugs
(lines never flushed, sources retired at once) must fail that check.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPS = ("post", "claim", "finish", "post_many", "claim_many", "finish_many")
BATCH = 5  # tasks in each batch of the child
CHILD = """
import os, sys
from pathlib import Path
from queues.store import PostEntry, QueueSettings, QueueStore, Report, StoreConfig, files
root = Path(sys.argv[1])
flush = sys.argv[3]
if sys.argv[2] == "plant":
    from queues.store import copies
    from queues.store.eventlog import EventLog
    def commit(dir_fd, temp, name, *, fsync):
        files._call("rename", os.rename, temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    files.commit_temp = commit
    files.DirSyncs.flush = lambda self: None  # a batch that never syncs its directories
    # and under syncfs, where the writes wait for the operation's one flush: lines never
    # flushed, and moves that retire their sources at once
    append = EventLog._append
    EventLog._append = lambda self, day, data, flush=True: append(self, day, data, flush=False)
    commit_one, commit_many = copies.commit, copies.commit_many
    def retired_at_once(commit):
        def plant(qd, *args, fsync, **kw):
            copies.retire(qd, commit(qd, *args, fsync=fsync, **kw), fsync=fsync)
            return []
        return plant
    copies.commit, copies.commit_many = retired_at_once(commit_one), retired_at_once(commit_many)
s = QueueSettings(lease_seconds=3600)
config = StoreConfig(items_dir=root / "items", logs_dir=root / "logs", fsync=True, flush=flush)
st = QueueStore(config)
st.create_queue("task.example.com", "resize")
def mark(name):
    try:
        os.open("/.taskhoster-mark-" + name, os.O_RDONLY)
    except FileNotFoundError:
        pass
mark("post")
t = st.post("task.example.com", "resize", {"n": 1}, settings=s, posted_by="a").task
mark("claim")
st.claim("task.example.com", "resize", settings=s, worker="w")
mark("finish")
st.finish("task.example.com", "resize", t.id, settings=s, worker="w", attempt=1, result={})
mark("post_many")
entries = [PostEntry(item={"n": i}, idempotency_key=f"k{i}" if i % 2 else None) for i in range(5)]
st.post_many("task.example.com", "resize", entries, settings=s, posted_by="a")
mark("claim_many")
claimed = st.claim("task.example.com", "resize", settings=s, worker="w", max_tasks=5)
mark("finish_many")
reports = [Report(task_id=c.id, attempt=1, outcome="retry" if i == 0 else "result", result={})
           for i, c in enumerate(claimed)]
st.finish_many("task.example.com", "resize", reports, settings=s, worker="w")
mark("end")
"""
STRACE_CALLS = (
    "openat,rename,renameat,renameat2,link,linkat,unlink,unlinkat,fsync,fdatasync,syncfs,write"
)
SYNCS = ("fsync", "fdatasync", "syncfs")
STRACE = ["strace", "-f", "-y", "-qq", "-e", f"trace={STRACE_CALLS}"]
_LINE = re.compile(r"^(?:\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)")
_FD = re.compile(r"-?\d+<([^>]*)>")
_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')


def trace(tmp: Path, mode: str, flush: str = "fsync") -> list[tuple[str, list[str]]]:
    """The successful calls of the child, as (call, [paths]) with dir fds joined to names."""
    out = tmp / "strace.out"
    subprocess.run(
        [*STRACE, "-o", str(out), sys.executable, "-c", CHILD, str(tmp / "store"), mode, flush],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
        timeout=120,
    )
    calls = []
    for line in _joined(out.read_text().splitlines()):
        m = _LINE.match(line)
        if not m:
            continue
        call, args, rc = m.groups()
        if call == "openat" and "taskhoster-mark-" in args:
            calls.append(("mark", [_STR.search(args).group(1).rsplit("-", 1)[1]]))
            continue
        if int(rc) < 0:
            continue
        if call == "write":  # only its descriptor: the bytes written are no path
            fd = _FD.match(args)
            if fd and fd.group(1).endswith(".jsonl"):
                calls.append(("write", [fd.group(1)]))
            continue
        calls.append((call, _paths(args)))
    return calls


_UNFINISHED = re.compile(r"^(\d+)\s+(.*) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)$")


def _joined(lines: list[str]) -> list[str]:
    """strace -f splits a call that another thread's call interrupted into "<unfinished ...>"
    and "<... resumed>" lines (a batch's fsyncs run in several threads): each is joined back
    into one line, placed where the call returned (when its result became known)."""
    started: dict[str, str] = {}
    joined = []
    for line in lines:
        if m := _UNFINISHED.match(line):
            started[m.group(1)] = m.group(2)
        elif (m := _RESUMED.match(line)) and m.group(1) in started:
            joined.append(f"{m.group(1)} {started.pop(m.group(1))}{m.group(2)}")
        else:
            joined.append(line)
    return joined


def _paths(args: str) -> list[str]:
    """Each (dir fd, "name") pair becomes one path; a lone fd becomes its path."""
    tokens = re.findall(r'-?\d+<[^>]*>|"(?:[^"\\]|\\.)*"|AT_FDCWD', args)
    paths, pending_dir = [], None
    for tok in tokens:
        if tok.startswith('"'):
            name = tok[1:-1]
            paths.append(os.path.join(pending_dir, name) if pending_dir else name)
            pending_dir = None
        else:
            if pending_dir is not None:
                paths.append(pending_dir)
            pending_dir = _FD.match(tok).group(1) if tok != "AT_FDCWD" else ""
    if pending_dir:
        paths.append(pending_dir)
    return paths


def segments(calls: list[tuple[str, list[str]]]) -> dict[str, list[tuple[str, list[str]]]]:
    segs: dict[str, list[tuple[str, list[str]]]] = {}
    current = None
    for call, paths in calls:
        if call == "mark":
            current = paths[0]
            segs[current] = []
        elif current is not None:
            segs[current].append((call, paths))
    return segs


def problems(seg: list[tuple[str, list[str]]], *, closing: bool = False) -> list[str]:
    """What of the segment breaks the order. `closing`: the syncfs order of the fourth
    version, where an operation's writes wait for its one flush after its line (data=ordered
    keeps a fresh file's bytes ahead of its name): a rename needs no flush of its file before
    it, and a line may come before the flush, but every rename is flushed before the
    operation ends and every unlink of a task file comes after its destination's flush."""
    found = []
    fsynced = [(i, p[0]) for i, (c, p) in enumerate(seg) if c in ("fsync", "fdatasync") and p]
    barriers = [i for i, (c, _) in enumerate(seg) if c == "syncfs"]  # everything before it
    log_writes = [i for i, (c, _) in enumerate(seg) if c == "write"]

    def synced(path: str, after: int = -1, before: int = 10**9) -> bool:
        return any(after < i < before and p == path for i, p in fsynced) or any(
            after < i < before for i in barriers
        )

    for i, (call, paths) in enumerate(seg):
        if call.startswith("rename") and len(paths) == 2 and "/spare/" not in paths[1]:
            # (a file retired into spare/ needs no flush: lost, it leaves a losing copy)
            src, dst = paths
            tmp = os.path.basename(src).startswith(".tmp-")
            if tmp and not closing and not synced(src, before=i):
                found.append(f"rename {src} without an earlier fsync of it")
            if not synced(os.path.dirname(dst), after=i):
                found.append(f"rename to {dst} not followed by an fsync of its directory")
            line = next((w for w in log_writes if w > i), None)
            if (
                line is not None
                and not closing
                and not synced(os.path.dirname(dst), after=i, before=line)
            ):
                found.append(f"an event line written before the rename to {dst} was flushed")
        if call.startswith("unlink") and paths and paths[0].endswith(".json"):
            src = paths[0]
            if "/keys/" in src or ".tmp-" in src:
                continue
            name = os.path.basename(src)
            wrote = [
                i2
                for i2, (c, p) in enumerate(seg[:i])
                if c.startswith("rename") and len(p) == 2 and os.path.basename(p[1]) == name
            ]
            if not wrote or not synced(os.path.dirname(seg[wrote[-1]][1][1]), wrote[-1], i):
                found.append(f"unlink {src} before its destination directory was fsynced")
    return found


# CI sets TASKHOSTER_REQUIRE_STRACE=1 so a missing strace fails instead of skipping
needs_strace = pytest.mark.skipif(
    shutil.which("strace") is None and not os.environ.get("TASKHOSTER_REQUIRE_STRACE"),
    reason="strace not installed (apt-get install strace)",
)


CLAIMS = ("claim", "claim_many")
FLUSHED = tuple(op for op in OPS if op not in CLAIMS)


def no_flush(seg: list[tuple[str, list[str]]]) -> bool:
    """A claim flushes nothing (store.md, fourth version)."""
    return not any(c in SYNCS for c, _ in seg)


@needs_strace
def test_fsync_order_under_strace(tmp_path: Path) -> None:
    segs = segments(trace(tmp_path, "real"))
    assert all(no_flush(segs[op]) for op in CLAIMS)
    for op in FLUSHED:
        seg = segs[op]
        assert any(c.startswith("rename") for c, _ in seg), (op, seg)  # the op was traced
        assert any(c == "fsync" for c, _ in seg), (op, seg)
        assert problems(seg) == [], op
    # the claim and the finish each moved the task out of a directory it was in
    assert any(c == "renameat2" for c, _ in segs["claim"])
    assert any(c.startswith("unlink") for c, p in segs["finish"] if "/processing/" in p[0])
    # group commit: a batch fsyncs each directory it touched once, and the event log once
    assert dir_syncs(segs["post_many"]) == {"keys": 1, "pending": 1}
    # finish_many's tasks went to done/ and (one retried) pending/; processing/ they left
    assert dir_syncs(segs["finish_many"]) == {"done": 1, "pending": 1}
    assert dir_syncs(segs["finish"]) == {"done": 1}
    for op in ("post_many", "finish_many"):
        assert sum(1 for c, p in segs[op] if c == "fdatasync" and p[0].endswith(".jsonl")) == 1
        renames = [p for c, p in segs[op] if c.startswith("rename") and "/keys/" not in p[1]]
        assert len(renames) == BATCH, op
    assert sum(1 for c, p in segs["finish_many"] if c.startswith("unlink")) == BATCH


def dir_syncs(seg: list[tuple[str, list[str]]]) -> dict[str, int]:
    """How many times each directory of the queue was fsynced in the segment."""
    counts: dict[str, int] = {}
    for call, paths in seg:
        if call == "fsync" and paths and not os.path.basename(paths[0]).startswith(".tmp-"):
            name = os.path.basename(paths[0])
            if name in ("pending", "processing", "done", "keys"):
                counts[name] = counts.get(name, 0) + 1
    return counts


@needs_strace
def test_fsync_order_catches_a_missing_directory_fsync(tmp_path: Path) -> None:
    segs = segments(trace(tmp_path, "plant"))
    assert all(problems(segs[op]) for op in FLUSHED)


@needs_strace
def test_syncfs_order_under_strace(tmp_path: Path) -> None:
    segs = segments(trace(tmp_path, "real", "syncfs"))
    assert all(no_flush(segs[op]) for op in CLAIMS)
    for op in FLUSHED:
        seg = segs[op]
        calls = [c for c, _ in seg]
        assert any(c.startswith("rename") for c in calls), (op, seg)
        assert "syncfs" in calls and "fsync" not in calls, (op, seg)
        # the logs share the items' file system here: their line rides on a syncfs too
        assert "fdatasync" not in calls, (op, seg)
        assert problems(seg, closing=True) == [], op
    # a post and a finish: fresh files, their names and their line, then one flush
    for op in ("post", "finish"):
        calls = [c for c, _ in segs[op]]
        assert calls.count("syncfs") == 1, (op, calls)
        renames = [i for i, (c, p) in enumerate(segs[op]) if c.startswith("rename")
                   and os.path.basename(p[0]).startswith(".tmp-")]  # fmt: skip
        assert max(renames) < calls.index("write") < calls.index("syncfs"), op
    # a batch finish writes into the spares the claim kept: their data is flushed before
    # their names, then the lines and the closing flush; the processing/ copies go to spare/
    seg = segs["finish_many"]
    calls = [c for c, _ in seg]
    first, second = (i for i, c in enumerate(calls) if c == "syncfs")
    named = [i for i, (c, p) in enumerate(seg) if c.startswith("rename") and "/spare/" in p[0]]
    retired = [i for i, (c, p) in enumerate(seg) if c.startswith("rename") and "/spare/" in p[1]]
    assert len(named) == BATCH and first < min(named) and max(named) < calls.index("write")
    assert calls.index("write") < second < min(retired) and len(retired) == BATCH


@needs_strace
def test_syncfs_order_catches_a_missing_flush(tmp_path: Path) -> None:
    segs = segments(trace(tmp_path, "plant", "syncfs"))
    assert all(problems(segs[op], closing=True) for op in ("post", "finish", "finish_many"))
