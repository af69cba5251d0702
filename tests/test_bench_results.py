"""bench/results.py turns one run's numbers into RESULTS.md: each peer beside its baseline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_results():  # bench/ is scripts, not a package
    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "bench" / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def system(key, label, baseline="", multi_process=True):
    return {"key": key, "label": label, "flushes": "yes", "where": "in-process",
            "multi_process": multi_process, "baseline": baseline}  # fmt: skip


def result(key, consumers, drain, duplicates=0, tasks=10_000):
    return {"system": key, "consumers": consumers, "tasks": tasks, "drain": drain,
            "post": [1000.0, 1100.0, 900.0], "duplicates": duplicates}  # fmt: skip


REPORT = {
    "tasks": 10_000,
    "runs": 3,
    "load": 1.5,
    "redis": "appendonly=no",
    "versions": {"huey": "9.9", "persist-queue": "1.0", "rq": "2.0", "redis": "5.0"},
    "systems": [
        system("taskhoster-fsync-on", "taskhoster store, fsync on"),
        system("huey-sqlite-fsync", "huey SqliteHuey, fsync=True", "taskhoster-fsync-on"),
        system("pq-file", "persist-queue Queue", "taskhoster-fsync-on", multi_process=False),
    ],
    "results": [
        result("taskhoster-fsync-on", 1, [100.0, 150.0, 120.0]),
        result("taskhoster-fsync-on", 2, [200.0, 190.0, 210.0]),
        result("huey-sqlite-fsync", 1, [1200.0, 1000.0, 1300.0]),
        result("huey-sqlite-fsync", 2, [400.0, 380.0, 390.0], duplicates=3),
        result("pq-file", 1, [240.0, 240.0, 250.0], tasks=2_000),
    ],
}


def test_the_table_gives_medians_ranges_and_the_ratio_to_the_baseline() -> None:
    text = load_results().peers_table(REPORT)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()
            if line.startswith("| ") and "---" not in line}  # fmt: skip
    assert (
        "| 120 (100-150) | baseline | 200 (190-210) | baseline |"
        in rows["taskhoster store, fsync on"]
    )
    # Each "vs" is the median of the runs' pair ratios (run k beside run k, the same
    # consumers), not the ratio of the medians: 1,200/100, 1,000/150, 1,300/120 -> 10.83x;
    # 400/200, 380/190, 390/210 -> 2.00x (the medians' ratios would say 10.00x and 1.95x).
    huey = rows["huey SqliteHuey, fsync=True"]
    assert "| 1,200 (1,000-1,300) | 10.83x |" in huey
    assert "390 (380-400), 3 delivered twice | 2.00x |" in huey
    queue = rows["persist-queue Queue (2,000 tasks)"]
    assert "one process only" in queue
    assert "median of 3 runs (min-max)" in text
    assert "huey 9.9, persist-queue 1.0, rq 2.0, redis 5.0" in text


def test_results_md_holds_machine_table_and_every_output_and_says_quick() -> None:
    text = load_results().render(
        quick=True,
        seconds=150,
        machine_lines=["- CPUs: 2 (a CPU)"],
        peers={**REPORT, "command": ".venv/bin/python bench/peers_bench.py --quick"},
        outputs={"store_bench": "$ store_bench.py --quick\nlifecycles/s  500"},
    )
    assert "`make bench QUICK=1` in 2.5 minutes" in text
    assert "This is the quick run" in text
    assert "- CPUs: 2 (a CPU)" in text
    assert "`.venv/bin/python bench/peers_bench.py --quick`" in text
    assert "## store_bench\n\n```\n$ store_bench.py --quick\nlifecycles/s  500\n```" in text


def test_the_batch_targets_are_judged_from_the_same_runs_medians() -> None:
    report = {
        **REPORT,
        "systems": [
            *REPORT["systems"],
            system("taskhoster-batch-fsync-on", "batches, fsync on", "taskhoster-fsync-on"),
        ],
        "results": [
            *REPORT["results"],
            result("taskhoster-batch-fsync-on", 1, [700.0, 600.0, 650.0]),  # 650 vs 120, 1,200
            result("taskhoster-batch-fsync-on", 2, [500.0, 500.0, 500.0]),  # 500 vs 200, 390
        ],
    }
    text = load_results().peers_table(report)
    assert (
        "1 consumer: 650/s = 5.42x one at a time (target 3x: met), "
        "0.54x SqliteHuey fsync=True (target 0.5x: met)." in text
    )
    assert (
        "2 consumers: 500/s = 2.50x one at a time (target 3x: missed), "
        "1.28x SqliteHuey fsync=True (target 0.5x: met)." in text
    )


def depth_result(key, depth, consumers, drain, drained):
    return {"system": key, "depth": depth, "consumers": consumers, "cap": 30.0, "drain": drain,
            "drained": drained, "seconds": [30.0] * len(drain)}  # fmt: skip


DEPTHS = {
    "depths": [1_000, 100_000],
    "skipped": [10_000],
    "runs": 3,
    "cap": 30.0,
    "results": [
        depth_result("taskhoster-fsync-off", 1_000, 1, [900.0, 1000.0, 800.0], [1_000] * 3),
        depth_result("huey-file", 1_000, 1, [1500.0, 1400.0, 1600.0], [1_000] * 3),
        depth_result("taskhoster-fsync-off", 100_000, 2, [2000.0] * 3, [60_000] * 3),
        depth_result("huey-file", 100_000, 2, [20.0, 25.0, 15.0], [450, 600, 750]),
    ],
}


def test_the_depth_table_says_where_the_cap_stopped_a_run_and_judges_the_target() -> None:
    text = load_results().depth_table({**REPORT, "depths": DEPTHS})
    rows = [line for line in text.splitlines() if line.startswith("| 1") and "---" not in line]
    assert rows[0].startswith("| 1,000 | 1 | 900 (800-1,000) | 1,500 (1,400-1,600) |")
    assert rows[0].endswith("| 0.60x |")
    # Stopped by the cap: the rate is over the tasks taken, and the cell says so.
    assert "20 (15-25); did not finish 100,000 in 30 s: over the first 450-750 tasks" in rows[1]
    assert (
        "2,000 (2,000-2,000); did not finish 100,000 in 30 s: over the first 60,000 tasks"
        in rows[1]
    )
    assert rows[1].endswith("| 100.00x |")
    assert "missed at 1,000 with 1." in text
    assert "Depths not run here: 10,000" in text


def test_results_md_shows_the_depth_runs_after_the_peers() -> None:
    peers = {**REPORT, "depths": DEPTHS, "command": "peers_bench.py"}
    text = load_results().render(quick=False, seconds=60, machine_lines=[], peers=peers,
                                 outputs={})  # fmt: skip
    assert text.index("| system |") < text.index("Depth runs:") < text.index("| depth |")


HTTP_REPORT = {
    "runs": 3,
    "each": {
        "http": [110.0, 130.0, 120.0],
        "inprocess": [500.0, 400.0, 450.0],
        "http_cpu_ms": [9.0, 8.0, 8.5],
        "inprocess_cpu_ms": [2.0, 2.2, 2.1],
    },
    "batched": {"http": [900.0, 1000.0, 950.0], "inprocess": [1800.0, 2000.0, 1900.0]},
}


def test_the_http_targets_stand_beside_the_same_runs_in_process_rates() -> None:
    text = load_results().http_targets_table(HTTP_REPORT)
    each = next(line for line in text.splitlines() if line.startswith("| one at a time"))
    # 120 against 450: 27%, under the 30% asked
    assert (
        "| 120 (110-130) lifecycles/s | 450 (400-500) lifecycles/s | 27% | >= 30% | missed "
        "| 8.50 / 2.10 |" in each
    )
    batched = next(line for line in text.splitlines() if line.startswith("| batches of 100"))
    assert (
        "| 950 (900-1,000) drained/s | 1,900 (1,800-2,000) drained/s | 50% | >= 50% | met | - |"
        in batched
    )
    assert "Median of 3 runs (min-max)" in text


def test_results_md_has_the_http_targets_only_when_they_were_run() -> None:
    results = load_results()
    common = {"quick": False, "seconds": 60, "machine_lines": [], "peers": None, "outputs": {}}
    assert "## HTTP targets of issue 11" in results.render(**common, http_targets=HTTP_REPORT)
    assert "HTTP targets" not in results.render(**common)
