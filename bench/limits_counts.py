"""Flow control's cost per claim, counted rather than timed: system calls (strace) and
instructions (callgrind) of a claim on a queue whose limits are set but not reached, beside the
same claim on a queue without them (issue 27: within 10%).

    .venv/bin/python bench/limits_counts.py [--tasks 200] [--warm 100] [--finish]
        [--only none,maxProcessing] [--no-callgrind] [--no-strace] [--calls]

As bench/cpu_counts.py: each figure is the difference of two fresh processes' runs, one of
`warm` claims and one of `warm + tasks`, divided by `tasks`, so the start, the imports and the
store's opening cancel out. A run posts its tasks in batches of 100, then claims them one at a
time; the same run without the claims (posting alone) is subtracted, so what is left is the
claims alone. With --finish each claim is finished before the next (processing stays small, as
in bench/limits_bench.py), and the figure is a claim and its finish. The limits are far above
what the claims reach (the rows of bench/limits_bench.py); the keyed row's tasks carry 16 keys.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST, QUEUE = "bench.example.com", "q"
BIG = 10**6
ROWS = {  # name: (rate_count, max_processing, max_per_key, keyed tasks)
    "none": (0, 0, 0, False),
    "maxProcessing": (0, BIG, 0, False),
    "rate": (BIG, 0, 0, False),
    "maxPerKey": (0, 0, BIG, True),
    "all3-keyed": (BIG, BIG, BIG, True),
}


def workload(root: str, row: str, tasks: int, claims: bool, finish: bool) -> None:
    """Post `tasks` tasks, then (with `claims`) claim each; the measured child."""
    sys.path.insert(0, str(ROOT))
    from queues.store import PostEntry, QueueSettings, QueueStore, StoreConfig

    rate, most, per_key, keyed = ROWS[row]
    settings = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600, rate_count=rate,
                             rate_seconds=1, max_processing=most, max_per_key=per_key)  # fmt: skip
    store = QueueStore(StoreConfig(items_dir=Path(root) / "items", logs_dir=Path(root) / "logs",
                                   fsync=False))  # fmt: skip
    store.create_queue(HOST, QUEUE)
    for start in range(0, tasks, 100):
        entries = [
            PostEntry(item={"n": i}, concurrency_key=f"k{i % 16}" if keyed else None)
            for i in range(start, min(start + 100, tasks))
        ]
        store.post_many(HOST, QUEUE, entries, settings=settings, posted_by="bench")
    for _ in range(tasks if claims else 0):
        [task] = store.claim(HOST, QUEUE, settings=settings, worker="w")
        if finish:
            store.finish(HOST, QUEUE, task.id, settings=settings, worker="w",
                         attempt=task.attempts, result=None)  # fmt: skip
    store.close()


def _child(row: str, tasks: int, claims: bool, finish: bool, tool: list[str]) -> str:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        argv = [*tool, sys.executable, __file__, "--child", row, str(tasks), str(int(claims)),
                str(int(finish)), tmp]  # fmt: skip
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        run = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if run.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{run.stderr[-3000:]}")
        return run.stderr


def syscalls(*args) -> dict[str, int]:
    """Each system call's count in a run (strace -f -c: every thread)."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        _child(*args, ["strace", "-f", "-c", "-o", out.name])
        text = Path(out.name).read_text()
    counts: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            counts[fields[-1]] = int(fields[3])
    return counts


def instructions(*args) -> int:
    err = _child(*args, ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"])
    found = re.search(r"Collected : (\d+)", err)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{err[-2000:]}")
    return int(found.group(1))


def per_claim(measure, row: str, warm: int, tasks: int, finish: bool):
    """(claims of warm+tasks - posts of warm+tasks) - (the same of warm), over tasks."""

    def claims_alone(n: int):
        return measure(row, n, True, finish), measure(row, n, False, False)

    (hi, hi_posts), (lo, lo_posts) = claims_alone(warm + tasks), claims_alone(warm)
    if isinstance(hi, dict):
        names = set(hi) | set(hi_posts) | set(lo) | set(lo_posts)
        return {
            n: (hi.get(n, 0) - hi_posts.get(n, 0) - lo.get(n, 0) + lo_posts.get(n, 0)) / tasks
            for n in names
        }
    return (hi - hi_posts - lo + lo_posts) / tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="claims counted")
    parser.add_argument("--warm", type=int, default=100, help="claims in the baseline run")
    parser.add_argument("--finish", action="store_true", help="finish each claim before the next")
    parser.add_argument("--only", default=",".join(ROWS), help="rows, comma-separated")
    parser.add_argument("--no-strace", action="store_true")
    parser.add_argument("--no-callgrind", action="store_true")
    parser.add_argument("--calls", action="store_true", help="each system call's count too")
    args = parser.parse_args()
    for tool, wanted in (("strace", not args.no_strace), ("valgrind", not args.no_callgrind)):
        if wanted and shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (apt-get install {tool})")
    what = "a claim and its finish" if args.finish else "a claim"
    print(f"$ bench/limits_counts.py --tasks {args.tasks} --warm {args.warm}"
          f"{' --finish' if args.finish else ''}: per claim ({what}), the difference of "
          f"{args.warm} and {args.warm + args.tasks}, posting subtracted")  # fmt: skip
    print(f"{'limits':<15} {'system calls':>12} {'vs none':>8} {'instructions':>13} {'vs none':>8}")
    base: dict[str, float] = {}
    for row in args.only.split(","):
        calls = instr = None
        detail = ""
        if not args.no_strace:
            per = per_claim(syscalls, row, args.warm, args.tasks, args.finish)
            calls = sum(per.values())
            detail = ", ".join(
                f"{name} {n:.2f}" for name, n in sorted(per.items(), key=lambda kv: -kv[1])
                if abs(n) >= 0.005
            )  # fmt: skip
        if not args.no_callgrind:
            instr = per_claim(instructions, row, args.warm, args.tasks, args.finish)
        base.setdefault("calls", calls or 0.0)
        base.setdefault("instr", instr or 0.0)

        def cell(value, key, form):
            if value is None:
                return f"{'-':>12} {'-':>8}"
            ratio = f"{value / base[key]:.2f}x" if base[key] else "-"
            return f"{format(value, form):>12} {ratio:>8}"

        print(f"{row:<15} {cell(calls, 'calls', '.1f')} {cell(instr, 'instr', ',.0f')}",
              flush=True)  # fmt: skip
        if args.calls and detail:
            print(f"  {detail}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        workload(sys.argv[6], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1",
                 sys.argv[5] == "1")  # fmt: skip
    else:
        main()
