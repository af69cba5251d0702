"""The soak's verdict, from what a run leaves on disk (so it can be judged again, and tested on
synthetic runs): `python -m soak.checks RUN_DIR --items DIR --logs DIR --db FILE`.

The run fails on (issue 21):
- a process death it did not cause (procs.jsonl, the watcher's), or a sweep or ingester child
  the soak killed that serve did not replace;
- a traceback in any log (serve's stdout and stderr carry gunicorn's, the sweep's and the
  ingester's);
- a 5xx other than the documented `503 storage_unavailable` (the load's logs, and any 5xx but
  503 in gunicorn's access log);
- after the faults end: a file in pending/ or processing/ that is not a task of this queue (a
  planted FIFO, corrupt, truncated, foreign or other queue's file the sweep left), a directory,
  FIFO or symlink left where the store keeps its own files (dependents/, groups/, keys/), or a
  processing task whose lease has lapsed and was not taken back (after_faults.json);
- an event line lost or unparseable: a whole event line glued after a torn fragment (the
  ingester cannot read it), a torn fragment whose next line is not a whole, stored event line,
  an event line never terminated by its newline, an event line of the day-files that Task
  Logs' database does not hold, an event-stream `data:` line that does not parse;
- a task not ended exactly once after the final drain: an acknowledged task that is not
  finished, failed or cancelled in the store, whose ending (result, failed, timeout,
  cancelled) is not exactly one line in the day-files and one row in Task Logs; any task still
  pending or processing; a task no post explains; two tasks for one key.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.server import HOST, QUEUE

TERMINAL = {"finished", "failed", "cancelled"}
ENDINGS = {"result", "failed", "timeout", "cancelled"}
SCHEDULE_POSTER = "taskhoster:schedule"
TRACEBACK = "Traceback (most recent call last)"
# gunicorn's default access line: ... "GET /path HTTP/1.1" 503 123 "-" "agent"
ACCESS_STATUS = re.compile(r'" (\d{3}) (?:\d+|-) "')
DOCUMENTED_5XX = (503, "storage_unavailable")


@dataclass
class Verdict:
    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str, examples: list[Any] | None = None) -> None:
        shown = f" (e.g. {examples[:5]})" if examples else ""
        self.failures.append(what + shown)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        raw_lines = path.read_bytes().splitlines()
    except OSError:
        return out
    for raw in raw_lines:
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # the soak's own logs: a line cut by the run's end is no finding
        if isinstance(line, dict):
            out.append(line)
    return out


# -- the store ------------------------------------------------------------------------------


def read_tasks(queue_dir: Path) -> dict[str, dict[str, Any]]:
    """Each task's winning record (highest rev) from the regular files of its state dirs."""
    best: dict[str, dict[str, Any]] = {}
    for state in ("pending", "processing", "done"):
        try:
            entries = list(os.scandir(queue_dir / state))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith(".json") or not entry.is_file(follow_symlinks=False):
                continue
            try:
                record = json.loads(Path(entry.path).read_bytes())
            except (OSError, ValueError):
                continue
            if not isinstance(record, dict) or record.get("id") != entry.name[:-5]:
                continue
            if record.get("host") != HOST or record.get("queue") != QUEUE:
                continue  # a planted record of another queue: after_faults.json judges it
            old = best.get(record["id"])
            if old is None or int(old.get("rev", 0)) < int(record.get("rev", 0)):
                best[record["id"]] = record
    return best


def state_problems(queue_dir: Path, now_ms: int, grace_ms: int) -> list[str]:
    """What in pending/ and processing/ is neither claimable nor held by a live lease: entries
    named as tasks (`<id>.json`) that are not this queue's readable tasks, and processing tasks
    whose lease lapsed over `grace_ms` ago (the sweep should have taken them back); and what
    was planted beside them and not moved aside (beside_problems). A regular file not named as
    a task (a `notes.txt`) is no task and is left to `foreign_files`."""
    problems = []
    for state in ("pending", "processing"):
        try:
            entries = list(os.scandir(queue_dir / state))
        except OSError as exc:
            problems.append(f"{state}/ unreadable: {exc}")
            continue
        for entry in entries:
            where = f"{state}/{entry.name}"
            if entry.name.startswith("."):
                continue  # the store's own temp and lock files
            if not entry.is_file(follow_symlinks=False):
                problems.append(f"{where}: not a regular file (a planted FIFO?) left in place")
                continue
            if not entry.name.endswith(".json"):
                continue
            try:
                record = json.loads(Path(entry.path).read_bytes())
            except (OSError, ValueError):
                problems.append(f"{where}: corrupt or truncated, left in place")
                continue
            if not isinstance(record, dict) or record.get("id") != entry.name[:-5]:
                problems.append(f"{where}: a record under another id, left in place")
                continue
            if record.get("host") != HOST or record.get("queue") != QUEUE:
                problems.append(f"{where}: another queue's record, left in place")
                continue
            if state == "processing" and record.get("status") == "processing":
                lease = record.get("lease") or {}
                until = lease.get("until") if isinstance(lease, dict) else None
                if not isinstance(until, int) or until < now_ms - grace_ms:
                    problems.append(f"{where}: its lease lapsed {now_ms - (until or 0)} ms ago")
    return problems + beside_problems(queue_dir)


_GROUP_FILES = ("count", "owner", "closing", "closed", "callback", "unfinished")
_GROUP_DIRS = ("members", "ended")
_GROUP_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}", re.ASCII)
_KEY_NAME = re.compile(r"[0-9a-f]{32}\.json", re.ASCII)


def _is_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def beside_problems(queue_dir: Path) -> list[str]:
    """What the sweep should have moved aside where the store keeps its own files beside the
    state directories: anything but a regular file as a task's waiters, a key or one of a
    group's files, anything but a directory as a group or its members/ and ended/."""
    problems = []

    def listed(directory: Path) -> list[Path]:
        try:
            return sorted(directory.iterdir())
        except OSError:
            return []

    for path in listed(queue_dir / "dependents"):
        if path.name.endswith(".waiters") and not _is_file(path):
            problems.append(f"dependents/{path.name}: not a regular file, left in place")
    for path in listed(queue_dir / "keys"):
        if _KEY_NAME.fullmatch(path.name) and not _is_file(path):
            problems.append(f"keys/{path.name}: not a regular file, left in place")
    for path in listed(queue_dir / "groups"):
        if not (_GROUP_NAME.fullmatch(path.name) or path.name.startswith(".gone-")):
            continue
        if not _is_dir(path):
            problems.append(f"groups/{path.name}: not a directory, left in place")
            continue
        for name in _GROUP_FILES:
            entry = path / name
            if os.path.lexists(entry) and not _is_file(entry):
                problems.append(f"groups/{path.name}/{name}: not a regular file, left in place")
        for name in _GROUP_DIRS:
            entry = path / name
            if os.path.lexists(entry) and not _is_dir(entry):
                problems.append(f"groups/{path.name}/{name}: not a directory, left in place")
    return problems


def foreign_files(queue_dir: Path) -> list[str]:
    """Regular files in pending/ and processing/ not named as tasks: harmless, but counted."""
    found = []
    for state in ("pending", "processing"):
        try:
            entries = list(os.scandir(queue_dir / state))
        except OSError:
            continue
        found += [
            f"{state}/{e.name}"
            for e in entries
            if not e.name.startswith(".")
            and not e.name.endswith(".json")
            and e.is_file(follow_symlinks=False)
        ]
    return found


# -- the event log ----------------------------------------------------------------------------


@dataclass
class DayLine:
    file: str
    offset: int
    raw: bytes
    event: dict[str, Any] | None  # None: not a whole event line
    terminated: bool


def parse_event(raw: bytes) -> dict[str, Any] | None:
    try:
        line = json.loads(raw)
    except ValueError:
        return None
    if isinstance(line, dict) and isinstance(line.get("event"), str) and "id" in line:
        return line
    return None


def day_lines(tasks_log_dir: Path) -> list[DayLine]:
    out = []
    for path in sorted(tasks_log_dir.glob("*.jsonl")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            end = data.find(b"\n", offset)
            terminated = end >= 0
            end = end if terminated else len(data)
            raw = data[offset:end]
            out.append(DayLine(path.name, offset, raw, parse_event(raw), terminated))
            offset = end + 1
    return out


def glued_event(raw: bytes) -> tuple[int, dict[str, Any]] | None:
    """A whole event line written after a torn fragment, on the same line: where it starts in
    the line, and the event."""
    start = raw.find(b"{", 1)
    while start > 0:
        event = parse_event(raw[start:])
        if event is not None:
            return start, event
        start = raw.find(b"{", start + 1)
    return None


def readable_events(lines: list[DayLine]) -> list[tuple[str, int, dict[str, Any]]]:
    """Every event of the day-files a resynchronising reader can read: (file, offset, event),
    the whole lines and the events glued after a torn fragment."""
    out = []
    for line in lines:
        if line.event is not None:
            out.append((line.file, line.offset, line.event))
        elif (glued := glued_event(line.raw)) is not None:
            out.append((line.file, line.offset + glued[0], glued[1]))
    return out


def stored_lines(db: Path) -> dict[tuple[str, int], tuple[str, str, str]]:
    """Task Logs' rows of the soak's queue: (day-file, offset) -> (task id, event, status)."""
    if not db.exists():
        return {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT file, offset, task_id, event, status, host, queue FROM tasklogs_taskevent"
        ).fetchall()
    return {(f, int(o)): (t, e, s) for f, o, t, e, s, h, q in rows if (h, q) == (HOST, QUEUE)}


def check_events(lines: list[DayLine], stored: dict[tuple[str, int], Any], v: Verdict) -> None:
    glued, unresynced, unterminated, not_stored, torn = [], [], [], [], 0
    changed = []  # Task Logs filed another line at this offset: the day-file was written over
    for i, line in enumerate(lines):
        where = f"{line.file}@{line.offset}"
        if line.event is not None:
            if not line.terminated:
                unterminated.append(where)
            elif (line.file, line.offset) not in stored:
                not_stored.append(where)
            elif stored[(line.file, line.offset)][:2] != (
                str(line.event.get("id")),
                line.event.get("event"),
            ):
                changed.append(where)
            continue
        torn += 1
        if (found := glued_event(line.raw)) is not None:
            # the ingester may find the line start after the fragment (store.md: readers
            # resynchronise); if it did not store the event, the event is lost
            if (line.file, line.offset + found[0]) not in stored:
                glued.append(where)
            continue
        after = lines[i + 1] if i + 1 < len(lines) else None
        if after is not None and after.file != line.file:
            after = None
        # a torn tail at the very end, with nothing after it, has nothing to resynchronise
        if (after is None or after.event is None) and (line.terminated or after is not None):
            unresynced.append(where)
    v.figures["event lines (whole / torn fragments)"] = f"{len(lines) - torn} / {torn}"
    v.figures["event lines stored by Task Logs"] = sum(
        (ln.file, ln.offset) in stored for ln in lines if ln.event is not None
    )
    if glued:
        v.fail(f"{len(glued)} event lines lost: glued after a torn fragment, never stored", glued)
    if unresynced:
        v.fail(f"{len(unresynced)} torn fragments not followed by a whole line", unresynced)
    if unterminated:
        v.fail(f"{len(unterminated)} event lines never ended by a newline", unterminated)
    if not_stored:
        v.fail(f"{len(not_stored)} event lines Task Logs never stored", not_stored)
    if changed:
        v.fail(f"{len(changed)} event lines stored by Task Logs as another line", changed)


# -- the load's own logs ----------------------------------------------------------------------


@dataclass
class Load:
    intents: set[str] = field(default_factory=set)
    acks: dict[str, str] = field(default_factory=dict)  # key -> id
    keyless: set[str] = field(default_factory=set)
    conflicts: list[str] = field(default_factory=list)
    maybes: int = 0
    gave_up: int = 0
    http_5xx: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    sse_events: int = 0
    sse_bad: list[str] = field(default_factory=list)
    claims: int = 0
    endings: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def acked_ids(self) -> set[str]:
        return set(self.acks.values()) | self.keyless


def read_load(load_dir: Path) -> Load:
    load = Load()
    for path in sorted(load_dir.glob("*.jsonl")):
        for line in read_jsonl(path):
            e = line.get("e")
            if e == "intent":
                load.intents.add(line["key"])
            elif e == "ack":
                if line.get("key") is None:
                    load.keyless.add(line["id"])
                elif load.acks.setdefault(line["key"], line["id"]) != line["id"]:
                    load.conflicts.append(line["key"])
            elif e == "maybe":
                load.maybes += 1
            elif e == "gaveup":
                load.gave_up += 1
            elif e == "http":
                load.http_5xx.append(line)
            elif e == "requests":
                load.requests += int(line.get("n", 0))
            elif e == "sse":
                load.sse_events += int(line.get("events", 0))
            elif e == "sse_bad":
                load.sse_bad.append(str(line.get("raw", ""))[:80])
            elif e == "claim":
                load.claims += 1
            elif e == "end":
                load.endings[f"{line.get('how')}:{line.get('s')}"] += 1
    return load


# -- the processes and the logs ---------------------------------------------------------------


def check_processes(procs: list[dict[str, Any]], faults: list[dict[str, Any]], v: Verdict) -> None:
    deaths = [ln for ln in procs if ln.get("e") == "died"]
    uncaused = [f"{ln['kind']} pid {ln['pid']}" for ln in deaths if not ln.get("caused")]
    v.figures["process deaths (caused by the soak / not)"] = (
        f"{len(deaths) - len(uncaused)} / {len(uncaused)}"
    )
    if uncaused:
        v.fail(f"{len(uncaused)} process deaths the soak did not cause", uncaused)
    for kill in (ln for ln in faults if ln.get("op") in ("kill_sweep", "kill_ingest")):
        if "pid" not in kill:
            continue
        again = [
            ln
            for ln in procs
            if ln.get("e") == "started"
            and ln.get("kind") == kill["kind"]
            and ln["t"] >= kill["t"]
            and ln["pid"] != kill["pid"]
        ]
        if not again:
            v.fail(f"serve started no new {kill['kind']} after the soak killed pid {kill['pid']}")


def check_logs(paths: list[Path], v: Verdict) -> None:
    tracebacks, access_5xx, access_503 = [], [], 0
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if TRACEBACK in line:
                # the exception's own line: the first after the frames that is not indented
                tail = next((ln for ln in lines[i + 1 : i + 200] if ln and ln[0] != " "), "")
                tracebacks.append(f"{path.name}:{i + 1}: {tail[:160]}")
            match = ACCESS_STATUS.search(line)
            if match and match.group(1).startswith("5"):
                if match.group(1) == "503":
                    access_503 += 1
                else:
                    access_5xx.append(f"{path.name}:{i + 1}: {line[:160]}")
    v.figures["tracebacks in the logs"] = len(tracebacks)
    v.figures["access log: 503 / other 5xx"] = f"{access_503} / {len(access_5xx)}"
    if tracebacks:
        v.fail(f"{len(tracebacks)} tracebacks in the logs", tracebacks)
    if access_5xx:
        v.fail(f"{len(access_5xx)} answers 5xx other than 503 in the access log", access_5xx)


def check_answers(load: Load, v: Verdict) -> None:
    documented = [ln for ln in load.http_5xx if (ln.get("s"), ln.get("code")) == DOCUMENTED_5XX]
    other = [f"{ln.get('s')} {ln.get('code')} on {ln.get('op')}" for ln in load.http_5xx]
    other = [o for o, ln in zip(other, load.http_5xx, strict=True) if ln not in documented]
    v.figures["requests / 503 storage_unavailable / other 5xx"] = (
        f"{load.requests} / {len(documented)} / {len(other)}"
    )
    if other:
        v.fail(f"{len(other)} answers 5xx other than 503 storage_unavailable", other)
    v.figures["event-stream events read / unparseable"] = f"{load.sse_events} / {len(load.sse_bad)}"
    if load.sse_bad:
        v.fail(f"{len(load.sse_bad)} event-stream data lines that do not parse", load.sse_bad)


def check_tasks(
    load: Load,
    tasks: dict[str, dict[str, Any]],
    lines: list[DayLine],
    stored: dict[tuple[str, int], tuple[str, str, str]],
    v: Verdict,
) -> None:
    in_log: collections.Counter[str] = collections.Counter()
    cleaned = set()
    for _, _, event in readable_events(lines):
        if (event.get("host"), event.get("queue")) != (HOST, QUEUE):
            continue
        if event["event"] in ENDINGS and event.get("status") in TERMINAL:
            in_log[str(event["id"])] += 1
        if event["event"] == "cleaned":
            cleaned.add(str(event["id"]))
    in_db: collections.Counter[str] = collections.Counter(
        tid for tid, event, status in stored.values() if event in ENDINGS and status in TERMINAL
    )
    acked = load.acked_ids
    lost = [
        tid
        for tid in sorted(acked)
        if tasks.get(tid, {}).get("status") not in TERMINAL and tid not in cleaned
    ]
    stuck = [tid for tid, rec in sorted(tasks.items()) if rec.get("status") not in TERMINAL]
    by_key: dict[str, list[str]] = collections.defaultdict(list)
    for tid, rec in tasks.items():
        if rec.get("idempotencyKey") is not None:
            by_key[f"{rec.get('postedBy')}/{rec['idempotencyKey']}"].append(tid)
    twice = [ids for ids in by_key.values() if len(ids) > 1]
    unexplained, landed, maybes_used, scheduled = [], 0, 0, 0
    for tid, rec in sorted(tasks.items()):
        if tid in acked:
            continue
        key = rec.get("idempotencyKey")
        if rec.get("postedBy") == SCHEDULE_POSTER:
            scheduled += 1
        elif key is not None and key in load.intents and key not in load.acks:
            landed += 1  # a keyed post whose answer was lost: its intent explains it
        elif key is None and maybes_used < load.maybes:
            maybes_used += 1  # a keyless post whose answer was lost
        else:
            unexplained.append(tid)
    ended_wrong = []
    for tid in sorted(set(acked) | set(tasks)):
        if tid in lost or (tid not in tasks and tid not in cleaned):
            continue
        if in_log[tid] != 1 or in_db[tid] != 1:
            ended_wrong.append(f"{tid}: {in_log[tid]} in the day-files, {in_db[tid]} in Task Logs")
    v.figures["tasks acked / in the store / from the schedule"] = (
        f"{len(acked)} / {len(tasks)} / {scheduled}"
    )
    v.figures["posts given up / landed, answer lost (keyed / keyless)"] = (
        f"{load.gave_up} / {landed} / {maybes_used}"
    )
    v.figures["claims / endings by the load"] = f"{load.claims} / {dict(load.endings)}"
    v.figures["LOST (acked, not ended)"] = len(lost)
    v.figures["STUCK (pending or processing after the drain)"] = len(stuck)
    v.figures["UNEXPECTED (no post explains it)"] = len(unexplained) + len(load.conflicts)
    v.figures["NOT ENDED EXACTLY ONCE (log / Task Logs)"] = len(ended_wrong)
    if lost:
        v.fail(f"{len(lost)} acknowledged tasks not ended", lost)
    if stuck:
        v.fail(f"{len(stuck)} tasks still pending or processing after the drain", stuck)
    if unexplained or load.conflicts:
        v.fail(f"{len(unexplained) + len(load.conflicts)} tasks no post explains", unexplained)
    if twice:
        v.fail(f"{len(twice)} keys with two tasks", twice)
    if ended_wrong:
        v.fail(f"{len(ended_wrong)} tasks not ended exactly once", ended_wrong)


def fault_counts(faults: list[dict[str, Any]]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for line in faults:
        op = str(line.get("op"))
        if op != "faults_end" and "error" not in line and "skipped" not in line:
            counts[op] += 1
    return dict(sorted(counts.items()))


def check(run_dir: Path, *, items: Path, logs: Path, db: Path) -> Verdict:
    v = Verdict()
    faults = read_jsonl(run_dir / "faults.jsonl")
    v.figures["faults injected"] = fault_counts(faults)
    refused = collections.Counter(str(ln["op"]) for ln in faults if "error" in ln)
    if refused:
        first = next(ln for ln in faults if "error" in ln)
        v.figures["faults the injector could not apply"] = (
            f"{dict(sorted(refused.items()))}, e.g. {first['op']}: {first['error'][:120]}"
        )
    check_processes(read_jsonl(run_dir / "procs.jsonl"), faults, v)
    check_logs(sorted(run_dir.glob("*.out")) + sorted(run_dir.glob("*.err")), v)
    load = read_load(run_dir / "load")
    check_answers(load, v)
    after = run_dir / "after_faults.json"
    found = json.loads(after.read_text()) if after.exists() else {"problems": ["never checked"]}
    problems = found["problems"]
    v.figures["after the faults: files neither claimable nor leased"] = len(problems)
    v.figures["after the faults: seconds until settled"] = found.get("settled_seconds")
    if problems:
        v.fail(f"{len(problems)} entries neither claimable nor held after the faults", problems)
    lines = day_lines(logs / "tasks")
    stored = stored_lines(db)
    check_events(lines, stored, v)
    check_tasks(load, read_tasks(items / HOST / QUEUE), lines, stored, v)
    v.figures["foreign files left in the state dirs (not tasks)"] = len(
        foreign_files(items / HOST / QUEUE)
    )
    return v


def render(v: Verdict) -> str:
    width = max((len(k) for k in v.figures), default=0)
    out = [f"{name:<{width}}  {value}" for name, value in v.figures.items()]
    out += [f"  FAILED: {failure}" for failure in v.failures]
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--items", type=Path, required=True)
    p.add_argument("--logs", type=Path, required=True)
    p.add_argument("--db", type=Path, required=True)
    a = p.parse_args()
    v = check(a.run_dir, items=a.items, logs=a.logs, db=a.db)
    print(render(v))
    print("FAIL" if v.failures else "PASS")
    sys.exit(1 if v.failures else 0)


if __name__ == "__main__":
    main()
