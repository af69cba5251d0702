"""Writes bench/RESULTS.md from one `make bench` run: the machine, the versions, the exact
commands, the peers' table and every bench script's own output.

    .venv/bin/python bench/results.py OUT_DIR [--quick] [--seconds S]

OUT_DIR holds what `make bench` saved: <script>.txt (a script's output, its command on the
first line) and peers.json (bench/peers_bench.py --json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEERS = ("huey", "persist-queue", "rq", "redis")


def _rate(samples: list[float]) -> str:
    if len(samples) == 1:
        return f"{samples[0]:,.0f}"
    return f"{statistics.median(samples):,.0f} ({min(samples):,.0f}-{max(samples):,.0f})"


def peers_table(report: dict[str, Any]) -> str:
    """The peers' drain rates as a Markdown table, each beside the taskhoster row it is read
    against (same durability), with the fairness notes."""
    systems = {s["key"]: s for s in report["systems"]}
    by = {(r["system"], r["consumers"]): r for r in report["results"]}
    medians = {k: statistics.median(r["drain"]) for k, r in by.items()}
    runs = report["runs"]
    lines = [
        f"{report['tasks']:,} no-op tasks posted, then drained by consumer processes that "
        f"acknowledge each; tasks/s, median of {runs} run{'s' if runs > 1 else ''}"
        + (" (min-max)" if runs > 1 else "")
        + f"; load average {report['load']:.1f} at the end.",
        "",
        "| system | flushes to disk | runs in | post/s, 1 producer | drain/s, 1 consumer "
        "| vs taskhoster | drain/s, 2 consumers | vs taskhoster |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key, s in systems.items():
        if key in PG_ROWS:
            continue  # their own table below, beside SqliteHuey fsync on
        row = [s["label"], s["flushes"], s["where"]]
        one = by.get((key, 1))
        if one is None:
            continue
        tasks = "" if one["tasks"] == report["tasks"] else f" ({one['tasks']:,} tasks)"
        row[0] += tasks
        row.append(_rate(one["post"]))
        for consumers in (1, 2):
            result = by.get((key, consumers))
            if result is None:
                row += ["- (one process only)", ""]
                continue
            cell = _rate(result["drain"])
            if result["duplicates"]:
                cell += f", {result['duplicates']} delivered twice"
            row.append(cell)
            base = medians.get((s["baseline"], consumers)) if s["baseline"] else None
            row.append(f"{medians[(key, consumers)] / base:.2f}x" if base else "baseline")
        lines.append("| " + " | ".join(row) + " |")
    lines += _batch_targets(medians)
    lines += _pg_table(report, systems, by, medians)
    versions = report["versions"]
    lines += [
        "",
        "Fairness notes:",
        "- *vs taskhoster*: the median beside the taskhoster store's median with the same "
        "durability (fsync on for the rows that flush, off for the others), same run.",
        "- taskhoster, huey and persist-queue run in-process on local files; RQ goes through a "
        f"server (Redis on 127.0.0.1, TCP), whose persistence is: {report['redis']}.",
        "- huey removes a task as it dequeues it (the dequeue is the acknowledgement); "
        "taskhoster writes a leased record on claim and a done record on finish.",
        f"- SQLite {versions.get('SQLite', '?')} compiled default synchronous="
        f"{versions.get('SQLite default synchronous', '?')} (2 = FULL): persist-queue's SQLite "
        "queue keeps it, so it flushes its WAL on every commit.",
        f"- FileHuey lists its queue directory on every dequeue, so it slows with depth: it runs "
        f"at most {2_000:,} tasks here; its rate at 10,000 would be lower.",
        "- persist-queue's file Queue is not made for several processes: one consumer only; "
        "a duplicate count beside a rate means a task was handed to two consumers.",
        "- RQ's default Worker forks per job; SimpleWorker (used here, burst mode) does not.",
        "- Peers' versions: " + ", ".join(f"{k} {versions.get(k, '?')}" for k in PEERS) + ".",
    ]
    return "\n".join(lines)


PG_ROWS = ("taskhoster-pg", "taskhoster-pg-batch")
PG_BASELINE = "huey-sqlite-fsync"


def _pg_table(
    report: dict[str, Any],
    systems: dict[str, Any],
    by: dict[tuple[str, int], Any],
    medians: dict[tuple[str, int], float],
) -> list[str]:
    """The PostgreSQL store's drain with 1, 2 and 4 consumers beside SqliteHuey fsync on, and
    issue 13's targets: in batches faster than it, one at a time within 2x of it."""
    if not any((key, 1) in by for key in PG_ROWS):
        return []
    counts = (1, 2, 4)
    lines = [
        "",
        "PostgreSQL store (issue 13), each cell beside SqliteHuey fsync=True with as many "
        f"consumers, same run; PostgreSQL {report.get('postgres', '?')}:",
        "",
        "| system | post/s, 1 producer | "
        + " | ".join(f"drain/s, {c} consumer{'s' if c > 1 else ''} | vs SqliteHuey" for c in counts)
        + " |",
        "| --- | --- |" + " --- | --- |" * len(counts),
    ]
    for key in (*PG_ROWS, PG_BASELINE):
        one = by.get((key, 1))
        if one is None:
            continue
        row = [systems[key]["label"], _rate(one["post"])]
        for consumers in counts:
            result = by.get((key, consumers))
            base = medians.get((PG_BASELINE, consumers))
            if result is None:
                row += ["-", ""]
                continue
            row.append(_rate(result["drain"]))
            mine = medians[(key, consumers)]
            row.append("baseline" if key == PG_BASELINE else f"{mine / base:.2f}x" if base else "")
        lines.append("| " + " | ".join(row) + " |")
    targets = []
    for consumers in counts:
        base = medians.get((PG_BASELINE, consumers))
        batched = medians.get(("taskhoster-pg-batch", consumers))
        single = medians.get(("taskhoster-pg", consumers))
        if not base:
            continue
        if batched:
            met = "met" if batched > base else "missed"
            targets.append(f"- batches, {consumers} consumer(s): {batched / base:.2f}x "
                           f"SqliteHuey fsync=True (target above 1x: {met})")  # fmt: skip
        if single:
            met = "met" if single >= base / 2 else "missed"
            targets.append(f"- one at a time, {consumers} consumer(s): {single / base:.2f}x "
                           f"SqliteHuey fsync=True (target 0.5x or more: {met})")  # fmt: skip
    return [*lines, "", "Targets of issue 13 (same run, medians):", *targets]


def _batch_targets(medians: dict[tuple[str, int], float]) -> list[str]:
    """Issue 11's targets for the batched fsync-on drain, from the medians of this run:
    at least 3x the one-at-a-time durable rate and at least half of SqliteHuey fsync on."""
    lines = []
    for consumers in (1, 2):
        batched = medians.get(("taskhoster-batch-fsync-on", consumers))
        single = medians.get(("taskhoster-fsync-on", consumers))
        huey = medians.get(("huey-sqlite-fsync", consumers))
        if batched is None or single is None:
            continue
        text = (
            f"- Batched fsync-on drain, {consumers} consumer{'s' if consumers > 1 else ''}: "
            f"{batched:,.0f}/s = {batched / single:.2f}x one at a time "
            f"(target 3x: {'met' if batched >= 3 * single else 'missed'})"
        )
        if huey:
            met = "met" if batched >= huey / 2 else "missed"
            text += f", {batched / huey:.2f}x SqliteHuey fsync=True (target 0.5x: {met})"
        lines.append(text + ".")
    return ["", "Targets of issue 11 (same run, medians):", *lines] if lines else []


def machine() -> list[str]:
    cpu = "?"
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                cpu = text.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return [
        f"- CPUs: {os.cpu_count()} ({cpu})",
        f"- kernel: {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}, Django {version('django')}, "
        f"psycopg {version('psycopg')}, orjson {version('orjson')}",
    ]


def render(
    *,
    quick: bool,
    seconds: float | None,
    machine_lines: list[str],
    peers: dict[str, Any] | None,
    outputs: dict[str, str],
) -> str:
    """RESULTS.md's text from one run's pieces."""
    took = f" in {seconds / 60:.1f} minutes" if seconds else ""
    out = [
        "# Benchmark results",
        "",
        f"Written by `make bench{' QUICK=1' if quick else ''}`{took}. "
        + (
            "**This is the quick run**: fewer tasks and one run per figure, and the long "
            "scripts left out; `make bench` gives the full figures."
            if quick
            else "Each script's own figures stand beside the baseline it measured in the same run."
        ),
        "",
        "## Machine",
        "",
        *machine_lines,
        "",
    ]
    if peers:
        out += ["## The peers", "", f"`{peers.get('command', 'bench/peers_bench.py')}`", ""]
        out += [peers_table(peers), ""]
    for name, text in outputs.items():
        out += [f"## {name}", "", "```", text.rstrip(), "```", ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    peers_file = args.out_dir / "peers.json"
    peers = json.loads(peers_file.read_text()) if peers_file.exists() else None
    outputs = {p.stem: p.read_text() for p in sorted(args.out_dir.glob("*.txt"))}
    if peers and "peers_bench" in outputs:  # its table is written from the JSON instead
        peers["command"] = outputs.pop("peers_bench").splitlines()[0].removeprefix("$ ")
    text = render(quick=args.quick, seconds=args.seconds, machine_lines=machine(),
                  peers=peers, outputs=outputs)  # fmt: skip
    (HERE / "RESULTS.md").write_text(text)
    print(f"wrote {(HERE / 'RESULTS.md').relative_to(HERE.parent)}", file=sys.stderr)


if __name__ == "__main__":
    main()
