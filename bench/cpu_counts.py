"""CPU per task, counted rather than timed: system calls (strace) and instructions (callgrind)
per task of the store's lifecycle post -> claim -> finish, one at a time and in batches of 100,
with fsync off, fsync on (per-file fsync) and fsync on by syncfs.

    .venv/bin/python bench/cpu_counts.py [--tasks 200] [--only single-off,batch-syncfs]
        [--no-callgrind] [--no-strace]

Each count is the difference of two runs of a fresh process, one of `warm` tasks and one of
`warm + tasks`, divided by `tasks`: the interpreter's start, the imports and the store's opening
cancel out, and what is left is the cost of the extra tasks alone. Counts need no quiet machine:
the same code makes the same calls and executes (nearly) the same instructions on any load.
strace counts every thread's calls (-f); callgrind counts user-space instructions only (what the
kernel does inside a call is not in them: the system calls are the other column).
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
SHAPES = {  # name: (batch size, fsync, flush)
    "single-off": (1, False, "fsync"),
    "single-fsync": (1, True, "fsync"),
    "single-syncfs": (1, True, "syncfs"),
    "batch-off": (100, False, "fsync"),
    "batch-fsync": (100, True, "fsync"),
    "batch-syncfs": (100, True, "syncfs"),
}


def workload(root: str, shape: str, tasks: int) -> None:
    """Run `tasks` lifecycles of `shape` in this process (the measured child)."""
    sys.path.insert(0, str(ROOT))
    from queues.store import PostEntry, QueueSettings, QueueStore, Report, StoreConfig

    size, fsync, flush = SHAPES[shape]
    settings = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600)
    store = QueueStore(
        StoreConfig(
            items_dir=Path(root) / "items", logs_dir=Path(root) / "logs", fsync=fsync, flush=flush
        )
    )
    store.create_queue(HOST, QUEUE)
    done = 0
    while done < tasks:
        n = min(size, tasks - done)
        if size == 1:
            store.post(HOST, QUEUE, {"n": done}, settings=settings, posted_by="bench")
            [task] = store.claim(HOST, QUEUE, settings=settings, worker="w")
            store.finish(HOST, QUEUE, task.id, settings=settings, worker="w",
                         attempt=task.attempts, result={"ok": 1})  # fmt: skip
        else:
            entries = [PostEntry(item={"n": done + i}) for i in range(n)]
            store.post_many(HOST, QUEUE, entries, settings=settings, posted_by="bench")
            claimed = store.claim(HOST, QUEUE, settings=settings, worker="w", max_tasks=n)
            assert len(claimed) == n, (len(claimed), n)
            reports = [Report(task_id=t.id, attempt=t.attempts, outcome="result",
                              result={"ok": 1}) for t in claimed]  # fmt: skip
            store.finish_many(HOST, QUEUE, reports, settings=settings, worker="w")
        done += n
    store.close()


def _child(shape: str, tasks: int, tool: list[str]) -> str:
    """Run the workload under `tool` in a fresh process and a fresh store; its stderr."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        argv = [*tool, sys.executable, __file__, "--child", shape, str(tasks), tmp]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        run = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if run.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{run.stderr[-3000:]}")
        return run.stderr


def syscalls(shape: str, tasks: int) -> tuple[int, dict[str, int]]:
    """System calls of a run: the total and each call's count."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        _child(shape, tasks, ["strace", "-f", "-c", "-o", out.name])
        text = Path(out.name).read_text()
    counts: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        # "% time seconds usecs/call calls [errors] syscall", the total line last
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            counts[fields[-1]] = int(fields[3])
    return sum(counts.values()), counts


def instructions(shape: str, tasks: int) -> int:
    err = _child(shape, tasks, ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"])
    found = re.search(r"Collected : (\d+)", err)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{err[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks counted (a multiple of 100)")
    parser.add_argument("--warm", type=int, default=100, help="tasks in the baseline run")
    parser.add_argument("--only", default=",".join(SHAPES), help="shapes, comma-separated")
    parser.add_argument("--no-strace", action="store_true")
    parser.add_argument("--no-callgrind", action="store_true")
    parser.add_argument("--calls", action="store_true", help="each system call's count too")
    args = parser.parse_args()
    shapes = args.only.split(",")
    for tool, wanted in (("strace", not args.no_strace), ("valgrind", not args.no_callgrind)):
        if wanted and shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (apt-get install {tool})")
    print(f"per task, the difference of {args.warm} and {args.warm + args.tasks} tasks")
    print(f"{'lifecycle':<15} {'system calls':>12} {'instructions':>14}")
    for shape in shapes:
        calls = instr = "-"
        detail = ""
        if not args.no_strace:
            low, low_counts = syscalls(shape, args.warm)
            high, high_counts = syscalls(shape, args.warm + args.tasks)
            calls = f"{(high - low) / args.tasks:.1f}"
            per = {
                name: (high_counts.get(name, 0) - low_counts.get(name, 0)) / args.tasks
                for name in high_counts
            }
            detail = ", ".join(
                f"{name} {n:.2f}"
                for name, n in sorted(per.items(), key=lambda kv: -kv[1])
                if n >= 0.005
            )
        if not args.no_callgrind:
            low_i = instructions(shape, args.warm)
            high_i = instructions(shape, args.warm + args.tasks)
            instr = f"{(high_i - low_i) / args.tasks:,.0f}"
        print(f"{shape:<15} {calls:>12} {instr:>14}", flush=True)
        if args.calls and detail:
            print(f"  {detail}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        workload(sys.argv[4], sys.argv[2], int(sys.argv[3]))
    else:
        main()
