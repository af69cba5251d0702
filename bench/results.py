"""Writes bench/RESULTS.md from one `make bench` run: the machine, the versions, the exact
commands, the peers' table and every bench script's own output.

    .venv/bin/python bench/results.py OUT_DIR [--quick] [--seconds S]

OUT_DIR holds what `make bench` saved: <script>.txt (a script's output, its command on the
first line), peers.json (bench/peers_bench.py --json) and http.json (bench/http_bench.py
--json: issue 11's two HTTP targets).
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
            other = by.get((s["baseline"], consumers)) if s["baseline"] else None
            row.append(f"{vs(result, other):.2f}x" if other else "baseline")
        lines.append("| " + " | ".join(row) + " |")
    lines += _batch_targets(medians)
    lines += _flush_targets(by)
    lines += _pg_table(report, systems, by, medians)
    versions = report["versions"]
    lines += [
        "",
        "Fairness notes:",
        "- *vs taskhoster*: beside the taskhoster row with the same durability (fsync on for "
        "the rows that flush, off for the others; a syncfs row beside its fsync row), same run; "
        "the systems take turns run after run, and the figure is the median of the run-by-run "
        "ratios.",
        "- taskhoster, huey and persist-queue run in-process on local files; RQ goes through a "
        f"server (Redis on 127.0.0.1, TCP), whose persistence is: {report['redis']}.",
        "- huey removes a task as it dequeues it (the dequeue is the acknowledgement); "
        "taskhoster writes a leased record on claim and a done record on finish.",
        f"- SQLite {versions.get('SQLite', '?')} compiled default synchronous="
        f"{versions.get('SQLite default synchronous', '?')} (2 = FULL): persist-queue's SQLite "
        "queue keeps it, so it flushes its WAL on every commit.",
        f"- FileHuey lists its queue directory on every dequeue, so it slows with depth: it runs "
        f"at most {2_000:,} tasks here; the depth runs below measure it deeper.",
        "- persist-queue's file Queue is not made for several processes: one consumer only; "
        "a duplicate count beside a rate means a task was handed to two consumers.",
        "- RQ's default Worker forks per job; SimpleWorker (used here, burst mode) does not.",
        "- Peers' versions: " + ", ".join(f"{k} {versions.get(k, '?')}" for k in PEERS) + ".",
    ]
    return "\n".join(lines)


DEPTH_LABELS = {
    "taskhoster-fsync-off": "taskhoster, fsync off",
    "huey-file": "huey FileHuey (no fsync option)",
    "taskhoster-fsync-on": "taskhoster, fsync on",
}


def depth_table(report: dict[str, Any]) -> str:
    """The depth runs (peers_bench.py): FileHuey beside the store at each depth, 1 and 2
    consumers, each run's drain stopped by a time cap that is reported where it struck."""
    depth = report["depths"]
    by = {(r["system"], r["depth"], r["consumers"]): r for r in depth["results"]}
    runs, cap = depth["runs"], depth["cap"]
    keys = [k for k in DEPTH_LABELS if any(r["system"] == k for r in depth["results"])]
    lines = [
        "Depth runs: the queue filled to a depth (not timed), then drained one at a time by "
        f"consumer processes for at most {cap:g} s a run; tasks/s, median of {runs} "
        f"run{'s' if runs > 1 else ''}" + (" (min-max)" if runs > 1 else "") + ". A run the cap "
        "stopped is measured over the tasks it took, which the cell gives: the queue was still "
        "about that deep throughout. Each taskhoster consumer's first claim learns the queue "
        "(a fresh process's index load): inside the timed drain.",
        "",
        "| depth | consumers | "
        + " | ".join(DEPTH_LABELS[k] for k in keys)
        + " | taskhoster fsync off / FileHuey |",
        "| --- | --- | " + " | ".join("---" for _ in keys) + " | --- |",
    ]
    verdicts = []
    for d in depth["depths"]:
        for consumers in (1, 2):
            if not any((key, d, consumers) in by for key in keys):
                continue  # not run (--depths, a system left out)
            row = [f"{d:,}", str(consumers)]
            for key in keys:
                r = by.get((key, d, consumers))
                row.append(_depth_cell(r, d, cap) if r else "")
            ours, huey = (
                by.get(("taskhoster-fsync-off", d, consumers)),
                by.get(("huey-file", d, consumers)),
            )
            if ours and huey:
                ratio = statistics.median(ours["drain"]) / statistics.median(huey["drain"])
                row.append(f"{ratio:.2f}x")
                verdicts.append((d, consumers, ratio))
            else:
                row.append("")
            lines.append("| " + " | ".join(row) + " |")
    if verdicts:
        missed = [f"{d:,} with {c}" for d, c, ratio in verdicts if ratio <= 1]
        lines += ["", "Target of issue 11, ahead of huey's file storage at each depth with 1 and 2 "
                  "consumers (taskhoster fsync off against FileHuey, which cannot flush): "
                  + ("met at every depth run" if not missed else "missed at " + ", ".join(missed))
                  + "."]  # fmt: skip
    if depth["skipped"]:
        skipped = ", ".join(f"{d:,}" for d in depth["skipped"])
        lines += ["", f"Depths not run here: {skipped} (the quick run, or --depths)."]
    return "\n".join(lines)


def _depth_cell(r: dict[str, Any], depth: int, cap: float) -> str:
    cell = _rate(r["drain"])
    capped = [n for n in r["drained"] if n < depth]
    if capped:
        taken = f"{min(capped):,}" + (f"-{max(capped):,}" if max(capped) != min(capped) else "")
        cell += f"; did not finish {depth:,} in {cap:g} s: over the first {taken} tasks"
    return cell


PG_ROWS = ("taskhoster-pg", "taskhoster-pg-batch", "taskhoster-pg-floor")
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
        # the floor's rows are one INSERT ... generate_series: no post rate to compare
        posted = "-" if key == "taskhoster-pg-floor" else _rate(one["post"])
        row = [systems[key]["label"], posted]
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
        floor = medians.get(("taskhoster-pg-floor", consumers))
        if not base:
            continue
        if batched:
            met = "met" if batched > base else "missed"
            targets.append(f"- batches, {consumers} consumer(s): {batched / base:.2f}x "
                           f"SqliteHuey fsync=True (target above 1x: {met})")  # fmt: skip
        if single:
            met = "met" if single >= base / 2 else "missed"
            text = (f"- one at a time, {consumers} consumer(s): {single / base:.2f}x "
                    f"SqliteHuey fsync=True (target 0.5x or more: {met})")  # fmt: skip
            if floor:
                text += (f"; the bare-SQL floor is {floor / base:.2f}x of it, and the store "
                         f"runs at {single / floor:.0%} of the floor")  # fmt: skip
            targets.append(text)
    return [*lines, "", "Targets of issue 13 (same run, medians):", *targets]


def vs(result: dict[str, Any], baseline: dict[str, Any]) -> float:
    """How `result` drains beside `baseline`: the median of the run-by-run ratios when the two
    took turns run after run (peers_bench does), else the ratio of the medians."""
    mine, theirs = result["drain"], baseline["drain"]
    if len(mine) == len(theirs):
        return statistics.median(a / b for a, b in zip(mine, theirs, strict=True))
    return statistics.median(mine) / statistics.median(theirs)


# Issue 24's targets for the drains made durable by syncfs: (row, read beside, least ratio)
FLUSH_TARGETS = (
    ("taskhoster-batch-syncfs", 2, "huey-sqlite-fsync", 0.8),
    ("taskhoster-batch-syncfs", 1, "huey-sqlite-fsync", 0.6),
    ("taskhoster-batch-syncfs", 1, "taskhoster-batch-fsync-off", 0.8),
    ("taskhoster-batch-syncfs", 2, "taskhoster-batch-fsync-off", 0.8),
)


def _flush_targets(by: dict[tuple[str, int], dict[str, Any]]) -> list[str]:
    lines = []
    for key, consumers, other, least in FLUSH_TARGETS:
        mine, theirs = by.get((key, consumers)), by.get((other, consumers))
        if mine is None or theirs is None:
            continue
        ratio = vs(mine, theirs)
        lines.append(
            f"- {key}, {consumers} consumer{'s' if consumers > 1 else ''}: {ratio:.2f}x "
            f"{other} (median of the runs' ratios; target {least}x: "
            f"{'met' if ratio >= least else 'missed'})."
        )
    return ["", "Targets of issue 24 (same runs, taking turns):", *lines] if lines else []


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


# Issue 11's HTTP targets: (key in http.json, what was run, unit, least HTTP / in-process ratio)
HTTP_TARGETS = (
    ("each", "one at a time: post, claim, result, read; 4 clients, fsync off", "lifecycles/s",
     0.30),
    ("batched", "batches of 100: 2 producers post, 4 workers claim `max` 100 and report in "
     "one batch finish; fsync on", "drained/s", 0.50),
)  # fmt: skip


def http_targets_table(report: dict[str, Any]) -> str:
    """Issue 11's HTTP targets as a Markdown table: each HTTP rate beside the same work done
    in-process in the same run (interleaved), the ratio of the medians judged."""
    runs = report["runs"]
    lines = [
        f"Median of {runs} run{'s' if runs > 1 else ''}"
        + (" (min-max)" if runs > 1 else "")
        + "; each HTTP run follows its in-process run on the same file system, so the "
        "machine's noise falls on both. The CPU column (all processes of a run, per lifecycle "
        "or task) moves much less with the shared machine's load than the rates do.",
        "",
        "| target | over HTTP (gunicorn) | in-process, same work | HTTP / in-process | target | "
        "| CPU ms each, HTTP (server + clients) / in-process |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key, what, unit, least in HTTP_TARGETS:
        found = report.get(key)
        if not found:
            continue
        ratio = statistics.median(found["http"]) / statistics.median(found["inprocess"])
        verdict = "met" if ratio >= least else "missed"
        cpu = "-"
        if found.get("http_cpu_ms") and found.get("inprocess_cpu_ms"):
            cpu = (
                f"{statistics.median(found['http_cpu_ms']):.2f} / "
                f"{statistics.median(found['inprocess_cpu_ms']):.2f}"
            )
        lines.append(
            f"| {what} | {_rate(found['http'])} {unit} | {_rate(found['inprocess'])} {unit} "
            f"| {ratio:.0%} | >= {least:.0%} | {verdict} | {cpu} |"
        )
    return "\n".join(lines)


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
    http_targets: dict[str, Any] | None = None,
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
        if peers["results"]:
            out += [peers_table(peers), ""]
        if "depths" in peers:
            out += [depth_table(peers), ""]
    if http_targets:
        out += ["## HTTP targets of issue 11", "", http_targets_table(http_targets), ""]
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
    http_file = args.out_dir / "http.json"
    http_targets = json.loads(http_file.read_text()) if http_file.exists() else None
    outputs = {p.stem: p.read_text() for p in sorted(args.out_dir.glob("*.txt"))}
    if peers and "peers_bench" in outputs:  # its table is written from the JSON instead
        peers["command"] = outputs.pop("peers_bench").splitlines()[0].removeprefix("$ ")
    text = render(quick=args.quick, seconds=args.seconds, machine_lines=machine(),
                  peers=peers, outputs=outputs, http_targets=http_targets)  # fmt: skip
    (HERE / "RESULTS.md").write_text(text)
    print(f"wrote {(HERE / 'RESULTS.md').relative_to(HERE.parent)}", file=sys.stderr)


if __name__ == "__main__":
    main()
