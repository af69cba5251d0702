"""`python -m chaos.run [--quick] [--store postgres] [--tasks N --kills K ...]`: the chaos run.

1. A server on a free loopback port with temp database and dirs, a queue with a short lease,
   `manage.py sweep --loop` every `--sweep-interval` seconds. `--store postgres`: the run first
   starts a private PostgreSQL cluster (chaos/pgcluster.py: its own temp data dir and port, as
   the `postgres` OS user, fsync on); the console's database is that cluster and the queue's
   store is PostgreSQL.
2. Producers post the tasks (idempotency keys, retrying); workers claim, work, report; the
   nemesis kills workers, pauses workers past their lease, kills gunicorn workers and the sweep,
   and with PostgreSQL crashes (or stops fast) the database and starts it again.
3. The nemesis stops; the workers drain the queue; the workers and the sweep loop stop; sweeps
   run until two in a row change nothing.
4. The checker reads A, F and E (chaos/checker.py) and the run exits 1 on any failure, and on
   any death the nemesis did not cause (a worker, the sweep loop, a web worker or its master),
   each named on a line of its own.

Every child leads its own session and is killed by process group in a `finally`, and every
phase has a deadline, so the run ends by itself whatever happens.
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from queues.metrics import multiproc
from queues.store.sweep import UNFORESEEN

from . import checker, pgcluster
from .nemesis import Fleet, Nemesis
from .pgcluster import PgCluster
from .server import HOST, PG_EVENTS_TABLE, QUEUE, ROOT, Server, kill_group

QUICK = {
    "tasks": 1500,
    "kills": 30,
    "pauses": 4,
    "web_kills": 4,
    "sweep_kills": 4,
    "pg_restarts": 3,
    "max_seconds": 170,
}
# What --quick adds to the deadline for PostgreSQL: initdb, the restarts and their time down.
QUICK_PG_EXTRA_SECONDS = 80


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m chaos.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick", action="store_true", help=f"the CI run: {QUICK} unless given explicitly"
    )
    p.add_argument("--tasks", type=int, default=10_000)
    p.add_argument("--kills", type=int, default=200, help="SIGKILLs of worker processes")
    p.add_argument("--pauses", type=int, default=20, help="SIGSTOPs past the lease")
    p.add_argument("--web-kills", type=int, default=20, help="SIGKILLs of gunicorn workers")
    p.add_argument("--sweep-kills", type=int, default=20, help="SIGKILLs of the sweep loop")
    p.add_argument(
        "--store",
        choices=("files", "postgres"),
        default="files",
        help="the queue's store; postgres runs a private PostgreSQL cluster and restarts it",
    )
    p.add_argument(
        "--pg-restarts",
        type=int,
        default=10,
        help="PostgreSQL restarts (--store postgres): crashes, every third a fast stop",
    )
    p.add_argument(
        "--pg-down-seconds", type=float, default=3.0, help="longest time the database stays down"
    )
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--lease", type=int, default=2, help="seconds")
    p.add_argument("--sweep-interval", type=float, default=0.5)
    p.add_argument(
        "--pause-seconds",
        type=float,
        default=None,
        help="longest pause (default lease + 10 s); a pause ends once the sweep has requeued",
    )
    p.add_argument("--backlog", type=int, default=300, help="producers hold back beyond it")
    p.add_argument("--web-workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--max-seconds", type=float, default=900, help="the whole run's deadline")
    p.add_argument("--dir", type=Path, default=None, help="keep the run here (default: a temp dir)")
    args = p.parse_args(argv)
    if args.quick:
        given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in (argv or sys.argv[1:])}
        for name, value in QUICK.items():
            if name not in given:
                setattr(args, name, value)
        if args.store == "postgres" and "max_seconds" not in given:
            args.max_seconds += QUICK_PG_EXTRA_SECONDS
    if args.seed is None:
        args.seed = random.randrange(1 << 32)  # noqa: S311 (seeded, to replay a run; not security)
    if args.pause_seconds is None:
        args.pause_seconds = args.lease + 10.0
    return args


def start_producers(
    args: argparse.Namespace, server: Server, run_dir: Path, run_id: str
) -> list[subprocess.Popen[bytes]]:
    pending = ["--pending-dsn", server.pg_dsn] if server.pg_dsn else []
    (run_dir / "producers").mkdir(exist_ok=True)
    procs, share = [], -(-args.tasks // args.producers)
    for i in range(args.producers):
        first, count = i * share, max(0, min(share, args.tasks - i * share))
        argv = [
            sys.executable,
            "-m",
            "chaos.producer",
            "--url",
            server.url,
            "--token",
            server.tokens["paul"],
            "--name",
            f"p{i}",
            "--log",
            str(run_dir / "producers" / f"p{i}.jsonl"),
            "--run-id",
            run_id,
            "--pending-dir",
            str(server.items / HOST / QUEUE / "pending"),
            "--first",
            str(first),
            "--count",
            str(count),
            "--seed",
            str(args.seed + i),
            "--backlog",
            str(args.backlog),
            *pending,
        ]
        with open(run_dir / "producers" / f"p{i}.err", "wb") as err:
            procs.append(subprocess.Popen(argv, cwd=ROOT, start_new_session=True, stderr=err))  # noqa: S603 (argv is ours)
    return procs


def say(message: str, started: float) -> None:
    print(f"[{time.monotonic() - started:6.1f}s] {message}", flush=True)


def run(args: argparse.Namespace, run_dir: Path) -> int:
    started = time.monotonic()
    deadline = started + args.max_seconds
    run_id = f"chaos{args.seed:x}"
    pg = PgCluster(log=run_dir / "postgres.log") if args.store == "postgres" else None
    server = Server(
        run_dir,
        lease=args.lease,
        web_workers=args.web_workers,
        threads=args.threads,
        pg_dsn=pg.dsn if pg else None,
    )
    fleet = Fleet(run_dir, server, args.workers, args.lease)
    producers: list[subprocess.Popen[bytes]] = []
    timings: dict[str, float] = {}
    code = 1
    try:
        if pg is not None:
            pg.init()
            say(f"private PostgreSQL on port {pg.port}, data {pg.data}", started)
        server.prepare()
        server.start()
        server.start_sweeper(args.sweep_interval)
        fleet.start_all()
        say(
            f"server {server.url}, {args.workers} workers, seed {args.seed}, dir {run_dir}", started
        )
        producers = start_producers(args, server, run_dir, run_id)
        nemesis = Nemesis(
            run_dir,
            server,
            fleet,
            seed=args.seed,
            kills=args.kills,
            pauses=args.pauses,
            web_kills=args.web_kills,
            sweep_kills=args.sweep_kills,
            pause_seconds=args.pause_seconds,
            sweep_interval=args.sweep_interval,
            max_gap=2.0,
            pg=pg,
            pg_restarts=args.pg_restarts,
            pg_down_seconds=args.pg_down_seconds,
        )
        work_start = time.monotonic()
        nemesis.run(lambda: server.counts()["done"] / max(1, args.tasks), deadline - 60)
        nemesis.settle_pauses(deadline - 50)
        calm = time.monotonic()
        timings["chaos"] = calm - work_start
        say(f"nemesis done {nemesis.done} skipped {nemesis.missed}; {server.counts()}", started)

        # drain: producers finish, then nothing pending or processing (the sweep loop requeues
        # what dead or paused workers held; the workers are still running)
        last_report = 0.0
        while time.monotonic() < deadline - 40:
            nemesis.tend()  # a worker that died by itself is replaced, never left dead
            counts = server.counts()
            posting = any(p.poll() is None for p in producers)
            if not posting and counts["pending"] == 0 and counts["processing"] == 0:
                break
            if time.monotonic() - last_report > 10:
                say(f"draining: {counts}, producers running: {posting}", started)
                last_report = time.monotonic()
            time.sleep(0.1)
        timings["drain"] = time.monotonic() - calm
        # a producer that crashed leaves its tasks unposted: no checker figure would show it
        crashed = [f"p{i} rc {p.returncode}" for i, p in enumerate(producers) if p.poll()]
        fleet.stop_all()
        kill_group(server.sweeper)
        for p in producers:
            kill_group(p)
        sweeps = server.sweep_to_fixpoint()
        timings["settle"] = time.monotonic() - calm
        say(f"fixpoint after {len(sweeps)} sweeps: {sweeps[-1] if sweeps else None}", started)

        fig = checker.check(run_dir, server.pg_dsn, PG_EVENTS_TABLE)
        api_mismatch = api_sample(server, fig, run_dir, args.seed)
        timings["wall"] = time.monotonic() - started
        print(checker.render(fig))
        print(f"{'API agrees with the store (sampled GETs)':<46}  {api_mismatch}")
        if pg is not None:
            print(f"{'PostgreSQL restarts (crash / fast stop)':<46}  {_pg_restarts(run_dir)}")
        print(
            f"{'chaos / drain / settle (to fixpoint) / wall':<46}  "
            f"{timings['chaos']:.1f}s / {timings['drain']:.1f}s / {timings['settle']:.1f}s / "
            f"{timings['wall']:.1f}s"
        )
        failures = fig.failures()
        if api_mismatch != "yes":
            failures.append("API disagrees with the store")
        if crashed or fig.tasks_intended != args.tasks:
            failures.append(
                f"producers ended early ({', '.join(crashed) or 'no crash'}): "
                f"{fig.tasks_intended} of {args.tasks} tasks intended"
            )
        if len(sweeps) >= 30:
            failures.append("no fixpoint in 30 sweeps")
        unforeseen = unforeseen_sweep_errors(run_dir / "sweeper.log")
        if unforeseen:
            failures.append(f"{len(unforeseen)} unforeseen sweep error(s): {unforeseen[0]}")
        for death in nemesis.deaths:
            print(f"DIED, not killed by the nemesis: {death}")
        if nemesis.deaths:
            failures.append(
                f"{len(nemesis.deaths)} process death(s) the nemesis did not cause: "
                + "; ".join(nemesis.deaths)
            )
        replay = " ".join(sys.argv[1:])
        if "--seed" not in sys.argv[1:]:
            replay += f" --seed {args.seed}"
        print(f"command: python -m chaos.run {replay}")
        print("FAIL: " + ", ".join(failures) if failures else "PASS")
        code = 1 if failures else 0
        return code
    finally:
        for p in producers:
            kill_group(p)
        fleet.kill_all()
        server.stop()
        if pg is not None:
            # a failed run keeps the cluster's files beside its run directory's
            pg.destroy(keep=code != 0)
            if code != 0:
                print(f"PostgreSQL data kept: {pg.data} (port {pg.port}; postgres -D to look)")


def unforeseen_sweep_errors(log: Path) -> list[str]:
    """The sweep loop survives a queue's unforeseen error (it logs it and goes on), so the run
    looks for them in its log: each is a bug the nemesis brought out."""
    return [
        line for line in log.read_text(errors="replace").splitlines() if f": {UNFORESEEN} (" in line
    ]


def _pg_restarts(run_dir: Path) -> str:
    ops = [line.get("op") for line in checker.read_jsonl(run_dir / "nemesis.jsonl")[0]]
    return f"{ops.count('pg_crash')} / {ops.count('pg_fast_stop')}"


def api_sample(server: Server, fig: checker.Figures, run_dir: Path, seed: int) -> str:
    """GET a sample of tasks through the API as their operator: the answer is the store's."""
    from taskhoster.client import ApiError, Client

    if server.pg_dsn:
        tasks, _ = checker.read_pg_store(server.pg_dsn)
    else:
        tasks, _ = checker.read_store(run_dir / "items")
    ids = sorted(tasks)
    sample = random.Random(seed).sample(ids, min(300, len(ids)))  # noqa: S311 (seeded, to replay a run; not security)
    client = Client(server.url, token=server.tokens["olga"], timeout=10)
    bad = []
    for tid in sample:
        try:
            view: dict[str, Any] = client.get(HOST, QUEUE, tid)
        except (ApiError, OSError) as exc:
            bad.append(f"{tid}: {exc}")
            continue
        if view["status"] != tasks[tid]["status"] or view.get("result") != tasks[tid].get("result"):
            bad.append(tid)
    return "yes" if not bad else f"no: {len(bad)} of {len(sample)}, e.g. {bad[:3]}"


def main() -> None:
    args = parse()
    if args.store == "postgres" and (why := pgcluster.missing()) is not None:
        print(f"chaos: {why}; cannot run --store postgres here.", file=sys.stderr)
        sys.exit(2)
    # SIGTERM (a CI timeout) unwinds through the finally that kills every child.
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
    sys.exit(run_in_its_directory(run, args, prefix="chaos-"))


def run_in_its_directory(
    run: Callable[[argparse.Namespace, Path], int], args: argparse.Namespace, *, prefix: str
) -> int:
    """`run` in `args.dir`, or in a temporary directory removed after a pass: a failed run's
    directory (logs, store, event log) is kept for the write-up. The chaos run's and the soak's."""
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        return run(args, args.dir)
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    code = 1
    try:
        code = run(args, tmp)
    finally:
        if code == 0:
            remove_run_directory(tmp)
        else:
            print(f"run directory kept: {tmp}")
    return code


def remove_run_directory(run_dir: Path) -> None:
    """A passed run's directory, and the figures its server kept in memory outside it: the
    server runs on its default metrics place (/dev/shm, one per var/), as deployed, and that
    place of a removed var/ would never be tidied by a later start."""
    figures = multiproc.in_memory(run_dir / "var")
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(figures, ignore_errors=True)


if __name__ == "__main__":
    main()
