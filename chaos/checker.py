"""The checker: the producers' acks (A), the final state of every task (F, read from the store),
and the event log (E). `python -m chaos.checker RUN_DIR [--pg DSN]` prints the figures and exits
1 on any lost, stuck, unexpected, unexplained duplicate or overwritten result.

F and E come from the file store's task files and day-files, or, for a PostgreSQL run, from
its tables: th_tasks (one row per task, its record the winner: there are no copies) and the
store's events table, whose rows are turned back into the file store's lines (rows.line_of),
in the order they were inserted. The definitions below are the same for both.

Definitions (quality.md "chaos", reliability.md T4):
- lost: an acknowledged id that is not terminal in F (missing, or still pending/processing).
- stuck: a task of F that is pending or processing after the sweeps' fixpoint.
- unexpected: a task of F that no producer acknowledged and that no un-acknowledged post
  explains. A post whose answer was lost (a gunicorn worker killed mid-request) may still have
  created its task; its key was logged as an `intent`, and the task's `idempotencyKey` names it.
  So a task is unexpected when its key was never intended, or when another task already holds
  its key (two tasks for one key: idempotency broken), or when its key was acked with another id.
- executions: the claims of a task. The server numbers them (`attempts`), so a task with final
  attempt n was claimed n times, even when a claim's line in E was lost to a kill between the
  state write and the log append (the workers' own claim lines are counted beside).
- a duplicate is every claim after a task's first. Claim k is explained when E holds a `requeue`
  (or `retried`) line for the task with `attempts` k-1 (the one that ended attempt k-1), no later
  than the claim. (Lines from two processes can land in the day-files in either order when a
  claim follows a requeue within a millisecond; the requeue's `at` is its sweep's start, so
  time orders them. The PostgreSQL event table's rows are in the order of the task's changes,
  so row order does: see `no_later`.)
- overwritten: more than one `result` line for a task, more than one result a worker saw
  accepted, or a final result whose attempt is not the task's last attempt.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from queues.store_pg.rows import line_of

from .server import HOST, PG_EVENTS_TABLE, QUEUE

TERMINAL = {"finished", "failed", "cancelled"}
EXPLAINS = {"requeue", "retried"}


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The lines of a JSONL file and the count of torn ones (a kill mid-write)."""
    lines, torn = [], 0
    with open(path, "rb") as f:
        for raw in f:
            try:
                lines.append(json.loads(raw))
            except ValueError:
                torn += 1
    return lines, torn


def read_store(items: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """Every task's winning copy (highest rev, as the store decides) and the count of extra
    copies still on disk (a fixpoint leaves none)."""
    base = items / HOST / QUEUE
    best: dict[str, dict[str, Any]] = {}
    extra = 0
    for d in ("pending", "processing", "done"):
        try:
            entries = list(os.scandir(base / d))
        except FileNotFoundError:
            continue
        for e in entries:
            if not e.name.endswith(".json"):
                continue
            try:
                rec = json.loads(Path(e.path).read_bytes())
            except (OSError, ValueError):
                continue
            rec["_dir"] = d
            old = best.get(rec["id"])
            if old is not None:
                extra += 1
                if old.get("rev", 0) >= rec.get("rev", 0):
                    continue
            best[rec["id"]] = rec
    return best, extra


def read_pg_store(dsn: str) -> tuple[dict[str, dict[str, Any]], int]:
    """Every task's record from th_tasks (the row is the task: no extra copies exist)."""
    best: dict[str, dict[str, Any]] = {}
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT record::text FROM th_tasks WHERE host = %s AND queue = %s", (HOST, QUEUE)
        )
        for (text,) in found:
            rec = json.loads(text)
            rec["_dir"] = "postgres"
            best[rec["id"]] = rec
    return best, 0


def read_pg_events(dsn: str, table: str = PG_EVENTS_TABLE) -> list[dict[str, Any]]:
    """The queue's event rows as the file store's lines, in insertion order (a task's rows
    are written under its row lock, so a later change's row always comes later)."""
    query = sql.SQL("SELECT * FROM {} WHERE host = %s AND queue = %s ORDER BY id").format(
        sql.Identifier(table)
    )
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        return [{**line_of(row), "_row": row["id"]} for row in conn.execute(query, (HOST, QUEUE))]


@dataclass
class Figures:
    tasks_intended: int = 0
    acked: int = 0
    gave_up: int = 0
    post_retries: int = 0
    retried_acks: int = 0
    replayed_acks: int = 0
    tasks_in_store: int = 0
    lost: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    landed_without_ack: int = 0
    claims: int = 0
    claims_only_in_worker_logs: int = 0
    claims_unlogged: int = 0
    explained_duplicates: int = 0
    unexplained_duplicates: list[str] = field(default_factory=list)
    redelivery_rate: float = 0.0
    overwritten: list[str] = field(default_factory=list)
    stale_409: int = 0
    other_409: int = 0
    late_accepted: int = 0
    progress_409: int = 0
    pauses: int = 0
    pause_outcomes: dict[str, int] = field(default_factory=dict)
    extra_copies: int = 0
    torn_lines: int = 0
    event_lines: int = 0
    failed_tasks: int = 0
    replay_mismatches: int = 0

    def failures(self) -> list[str]:
        out = []
        for name in ("lost", "stuck", "unexpected", "unexplained_duplicates", "overwritten"):
            if getattr(self, name):
                out.append(f"{name}: {len(getattr(self, name))}")
        return out


def check(run_dir: Path, pg_dsn: str | None = None, events_table: str = PG_EVENTS_TABLE) -> Figures:
    """The figures of a run; F and E from its PostgreSQL store when `pg_dsn` is given."""
    fig = Figures()
    # A: intents and acks
    intents: set[str] = set()
    acks: dict[str, str] = {}
    conflicts: list[str] = []
    for path in sorted((run_dir / "producers").glob("*.jsonl")):
        lines, torn = read_jsonl(path)
        fig.torn_lines += torn
        for line in lines:
            if line["e"] == "intent":
                intents.add(line["key"])
            elif line["e"] == "ack":
                if acks.setdefault(line["key"], line["id"]) != line["id"]:
                    conflicts.append(line["key"])
                fig.post_retries += line["tries"] - 1
                fig.retried_acks += line["tries"] > 1
                fig.replayed_acks += line.get("s") == 200
            elif line["e"] == "gaveup":
                fig.gave_up += 1
    fig.tasks_intended, fig.acked = len(intents), len(acks)

    # F: the store after the fixpoint
    if pg_dsn:
        tasks, fig.extra_copies = read_pg_store(pg_dsn)
    else:
        tasks, fig.extra_copies = read_store(run_dir / "items")
    fig.tasks_in_store = len(tasks)
    acked_ids = set(acks.values())
    for tid in acks.values():
        if tasks.get(tid, {}).get("status") not in TERMINAL:
            fig.lost.append(tid)
    by_key: dict[str, list[str]] = collections.defaultdict(list)
    for tid, rec in tasks.items():
        by_key[str(rec.get("idempotencyKey"))].append(tid)
        if rec["status"] not in TERMINAL:
            fig.stuck.append(tid)
        fig.failed_tasks += rec["status"] == "failed"
    for tid, rec in tasks.items():
        key = str(rec.get("idempotencyKey"))
        if tid in acked_ids:
            continue
        if key in intents and key not in acks and len(by_key[key]) == 1:
            fig.landed_without_ack += 1  # its post landed, its answer was lost: explained
        else:
            fig.unexpected.append(tid)
    fig.unexpected += [acks[k] for k in conflicts]

    # E: the event log, day-files in date order, lines in file order
    events: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for lines in _event_lines(run_dir, fig, pg_dsn, events_table):
        for line in lines:
            if line.get("queue") == QUEUE and "id" in line:
                events[line["id"]].append(line)

    # the workers' logs: claims and the answers to their results
    worker_claims: dict[str, set[int]] = collections.defaultdict(set)
    accepted: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
    answers: dict[tuple[str, str, int], str] = {}  # the first answer to each attempt's result
    claimed_at: dict[tuple[str, str], list[tuple[float, int]]] = collections.defaultdict(list)
    for path in sorted((run_dir / "workers").glob("*.jsonl")):
        lines, torn = read_jsonl(path)
        fig.torn_lines += torn
        for line in lines:
            if line["e"] == "claim":
                worker_claims[line["id"]].add(line["a"])
                claimed_at[(line["w"], line["id"])].append((line["t"], line["a"]))
            elif line["e"] == "progress" and line["s"] == "lease_lost":
                fig.progress_409 += 1
            elif line["e"] == "result":
                answers.setdefault((line["w"], line["id"], line["a"]), line["s"])
                if line["s"] == "ok":
                    accepted[line["id"]].append((line["w"], line["a"]))
                    fig.late_accepted += bool(line["late"])
                elif line["s"] == "lease_lost" and line["tries"] == 1:
                    if line["late"]:
                        fig.stale_409 += 1
                    else:
                        fig.other_409 += 1

    claimed_ids = set()
    for tid in set(events) | set(worker_claims) | set(tasks):
        lines = events.get(tid, [])
        claims = {ln["attempts"]: ln for ln in lines if ln["event"] == "claimed"}
        seen = set(claims) | worker_claims.get(tid, set())
        fig.claims_only_in_worker_logs += len(seen - set(claims))
        # The attempt counter is the server's count of claims: an attempt number that no line
        # shows was still a claim (its line and its answer both lost to kills).
        last = max([*seen, int(tasks.get(tid, {}).get("attempts", 0))], default=0)
        fig.claims_unlogged += last - len(seen)
        if last:
            claimed_ids.add(tid)
        fig.claims += last
        for this in range(2, last + 1):
            # the requeue that ended attempt this-1, no later than claim `this`
            if any(
                ln["event"] in EXPLAINS
                and ln["attempts"] == this - 1
                and no_later(ln, claims.get(this))
                for ln in lines
            ):
                fig.explained_duplicates += 1
            else:
                fig.unexplained_duplicates.append(f"{tid}@{this}")
        results = [ln for ln in lines if ln["event"] == "result"]
        final = tasks.get(tid, {})
        body = final["result"] if isinstance(final.get("result"), dict) else {}
        if (
            len(results) > 1
            # a result sent again after a broken connection is answered 200 as a replay: the
            # same worker and attempt accepted twice is one acceptance
            or len(set(accepted.get(tid, []))) > 1
            or (final.get("status") == "finished" and body.get("attempt") != final.get("attempts"))
        ):
            fig.overwritten.append(tid)
        # T9 in small: the last state-changing line's status is the file's status
        changes = [ln for ln in lines if ln["event"] not in ("fetched", "progress", "cleaned")]
        if final and changes and changes[-1]["status"] != final["status"]:
            fig.replay_mismatches += 1
    fig.redelivery_rate = (fig.claims - len(claimed_ids)) / max(1, len(claimed_ids))

    # the nemesis' pauses: what answer did the paused worker's late result get?
    nemesis = run_dir / "nemesis.jsonl"
    if nemesis.exists():
        outcomes: collections.Counter[str] = collections.Counter()
        paused_at: dict[tuple[str, str], float] = {}
        for line in read_jsonl(nemesis)[0]:
            if line["op"] == "pause":
                paused_at[(line["worker"], line["task"])] = line["t"]
            if line["op"] == "resume":
                fig.pauses += 1
                # the attempt it held: its last claim of the task before the pause (the same
                # worker may claim the task again after the resume)
                who = (str(line["worker"]), str(line["task"]))
                held = [a for t, a in claimed_at.get(who, []) if t <= paused_at.get(who, 0)]
                answer = answers.get((*who, max(held, default=0)), "unreported")
                outcomes[answer] += 1
                if answer == "ok" and line.get("requeued"):
                    # taken back by the sweep before the resume, yet its result was accepted
                    fig.overwritten.append(line["task"])
        fig.pause_outcomes = dict(outcomes)
    return fig


def no_later(line: dict[str, Any], claim: dict[str, Any] | None) -> bool:
    """Whether `line` came no later than `claim` (a claim with no line: whenever it was).

    Day-files: by `at`, since two processes' lines land in either order. The PostgreSQL event
    table: by row order, since a task's rows are written under its row lock, in the order of
    its changes; their `at` is each verb's start, so a claim that began before a sweep and
    took the task once the sweep's requeue committed has the earlier `at` (the full run met
    it: a claim 6 ms "before" the requeue it followed)."""
    if claim is None:
        return True
    if "_row" in line and "_row" in claim:
        return bool(line["_row"] < claim["_row"])
    return bool(line["at"] <= claim["at"])


def _event_lines(
    run_dir: Path, fig: Figures, pg_dsn: str | None, events_table: str
) -> list[list[dict[str, Any]]]:
    """E's lines, one list per day-file (the event table's rows: one list)."""
    out = []
    if pg_dsn:
        out.append(read_pg_events(pg_dsn, events_table))
    else:
        for path in sorted((run_dir / "logs" / "tasks").glob("*.jsonl")):
            lines, torn = read_jsonl(path)
            fig.torn_lines += torn
            out.append(lines)
    fig.event_lines += sum(len(lines) for lines in out)
    return out


def render(fig: Figures) -> str:
    def n(x: Any) -> Any:
        return len(x) if isinstance(x, list) else x

    rows = [
        ("tasks intended / acked / gave up", f"{fig.tasks_intended} / {fig.acked} / {fig.gave_up}"),
        (
            "post retries / acks after a retry / of them replays",
            f"{fig.post_retries} / {fig.retried_acks} / {fig.replayed_acks}",
        ),
        (
            "tasks in store / failed / extra copies",
            f"{fig.tasks_in_store} / {fig.failed_tasks} / {fig.extra_copies}",
        ),
        ("LOST (acked, not terminal)", n(fig.lost)),
        ("STUCK (pending/processing after fixpoint)", n(fig.stuck)),
        ("UNEXPECTED (terminal, unexplained by any post)", n(fig.unexpected)),
        ("landed without ack (explained by its intent)", fig.landed_without_ack),
        (
            "claims (only in worker logs / in no log)",
            f"{fig.claims} ({fig.claims_only_in_worker_logs} / {fig.claims_unlogged})",
        ),
        ("explained duplicates", fig.explained_duplicates),
        ("UNEXPLAINED duplicates", n(fig.unexplained_duplicates)),
        ("redelivery rate", f"{100 * fig.redelivery_rate:.2f}%"),
        ("OVERWRITTEN results", n(fig.overwritten)),
        ("stale results refused 409 (late / not late)", f"{fig.stale_409} / {fig.other_409}"),
        ("results accepted, answered after the lease", fig.late_accepted),
        ("progress refused 409", fig.progress_409),
        ("pauses holding a task -> their result's answer", f"{fig.pauses} -> {fig.pause_outcomes}"),
        (
            "event lines / torn lines / replay mismatches",
            f"{fig.event_lines} / {fig.torn_lines} / {fig.replay_mismatches}",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    out = [f"{name:<{width}}  {value}" for name, value in rows]
    for name in ("lost", "stuck", "unexpected", "unexplained_duplicates", "overwritten"):
        if getattr(fig, name):
            out.append(f"  first {name}: {getattr(fig, name)[:10]}")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description="Check a chaos run's directory.")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--pg", metavar="DSN", help="a PostgreSQL run: F and E from this database")
    p.add_argument("--events-table", default=PG_EVENTS_TABLE)
    a = p.parse_args()
    fig = check(a.run_dir, a.pg, a.events_table)
    print(render(fig))
    failures = fig.failures()
    print("FAIL: " + ", ".join(failures) if failures else "PASS")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
