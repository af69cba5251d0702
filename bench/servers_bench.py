"""Servers benchmark: taskhoster over HTTP beside beanstalkd and RabbitMQ, each a server on
loopback, each durable: taskhoster under gunicorn as the README's production layout runs it
(gunicorn.conf.py's workers and threads, fsync on, TASKHOSTER_FLUSH's default), beanstalkd
with its binlog fsynced on every write (-f 0), RabbitMQ with a durable queue, persistent
messages and publisher confirms (a transaction per batch of 100).

    .venv/bin/python bench/servers_bench.py [--tasks 2000] [--rounds 3] [--json FILE]

For each system and round: N tasks posted one at a time by one client, then drained one at a
time by 1 consumer; posted again, drained by 4; then the same in batches of 100 (beanstalkd has
no batch: n/a). taskhoster's worker drains as its worker loop does, each report claiming the
next task (`next`); RabbitMQ's consumers take pushed messages (prefetch 1, or 100 with one
ack for the batch). Every drain must take each task exactly once (the counts are checked).
The server's CPU (user + system, from /proc) is read around each phase: server CPU per 1,000
tasks is the post's and the 1-consumer drain's together. The systems take turns, round after
round in a rotated order, and each ratio is the median of the rounds' ratios; the machine is
shared, so say so with any figure. Then taskhoster's idle CPU with 100 claims held waiting.

Set-up: `apt-get install beanstalkd` (its binary is all this uses: the benchmark starts its own
on a free port, binlog in a temp directory); RabbitMQ listening on 127.0.0.1:5672 with the
guest user (Debian's `rabbitmq-server` as installed), or --rabbitmq HOST:PORT. The clients run
under var/bench-servers-venv, made on the first run with pika (RabbitMQ's client) installed;
the project does not depend on it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from http_bench_server import HOST, IDLE_QUEUE, QUEUE, Server, configured_threads, free_port  # noqa: E402

VENV = ROOT / "var" / "bench-servers-venv"
LOAD = HERE / "servers" / "load.py"
BATCH = 100
SHAPES = (  # (name, batch, consumers)
    ("one", 1, 1),
    ("one-4", 1, 4),
    ("batch", BATCH, 1),
    ("batch-4", BATCH, 4),
)


def client_python() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "pika"], check=True)
    return python


def process_cpu(pid: int) -> float:
    """User and system CPU seconds of one process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def find_process(name: str) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    return int(entry.name)
            except OSError:
                continue
    return None


@dataclass
class System:
    name: str
    address: str
    cpu: Callable[[], float]
    batches: bool = True
    env: dict[str, str] = field(default_factory=dict)
    stop_messages: bool = False  # RabbitMQ's consumers end at a stop message

    def queue(self, round_no: int, shape: str) -> str:
        if self.name == "taskhoster":
            return f"{HOST}/{QUEUE}"
        return f"th-bench-{os.getpid()}-{round_no}-{shape}"


def run_clients(python: Path, system: System, action: str, queue: str, tasks: int, batch: int,
                clients: int) -> dict[str, float]:  # fmt: skip
    """`clients` load.py processes at once; the phase's tasks, seconds and server CPU."""
    argv = [str(python), str(LOAD), system.name, action, "--address", system.address,
            "--queue", queue, "--tasks", str(tasks), "--batch", str(batch)]  # fmt: skip
    env = {**os.environ, **system.env}
    cpu_before = system.cpu()
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(clients)]  # fmt: skip
    answers = []
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise SystemExit(f"{system.name} {action} failed ({proc.returncode})")
        answers.append(json.loads(out.strip().splitlines()[-1]))
    cpu = system.cpu() - cpu_before
    seconds = max(a["end"] for a in answers) - min(a["start"] for a in answers)
    return {"count": sum(a["count"] for a in answers), "seconds": seconds, "cpu": cpu}


def one_shape(python: Path, system: System, round_no: int, shape: str, batch: int,
              consumers: int, tasks: int) -> dict[str, Any]:  # fmt: skip
    queue = system.queue(round_no, shape)
    post = run_clients(python, system, "post", queue, tasks, batch, 1)
    if system.stop_messages:
        run_clients(python, system, "stops", queue, consumers, 1, 1)
    drain = run_clients(python, system, "drain", queue, 0, batch, consumers)
    if post["count"] != tasks or drain["count"] != tasks:
        raise SystemExit(f"{system.name} {shape}: posted {post['count']}, drained "
                         f"{drain['count']} of {tasks}")  # fmt: skip
    return {
        "post_per_s": tasks / post["seconds"],
        "drain_per_s": tasks / drain["seconds"],
        "cpu_per_1000": (post["cpu"] + drain["cpu"]) / tasks * 1000,
        "post_cpu_per_1000": post["cpu"] / tasks * 1000,
        "drain_cpu_per_1000": drain["cpu"] / tasks * 1000,
    }


def start_beanstalkd(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("beanstalkd")
    if binary is None:
        raise SystemExit("beanstalkd is not installed: apt-get install beanstalkd")
    port = free_port()
    binlog = tmp / "binlog"
    binlog.mkdir()
    proc = subprocess.Popen([binary, "-l", "127.0.0.1", "-p", str(port), "-b", str(binlog),
                             "-f", "0"])  # fmt: skip
    time.sleep(0.5)
    return proc, port


def idle_with_waiters(server: Server, waiters: int, seconds: float) -> dict[str, float]:
    """taskhoster's server CPU over `seconds` idle, then with `waiters` claims held waiting."""
    from taskhoster.client import Client

    time.sleep(1)
    before = server.cpu_seconds()
    time.sleep(seconds)
    idle = server.cpu_seconds() - before
    client = Client(server.url, server.tokens["worker"], timeout=30)
    stop = threading.Event()

    def wait() -> None:
        while not stop.is_set():
            client.claim(HOST, IDLE_QUEUE, "idle", wait=60)  # none ends within the window

    threads = [threading.Thread(target=wait, daemon=True) for _ in range(waiters)]
    for thread in threads:
        thread.start()
    time.sleep(3)  # every claim sent and waiting
    before = server.cpu_seconds()
    time.sleep(seconds)
    held = server.cpu_seconds() - before
    stop.set()
    return {"idle_cpu_s": idle, "waiting_cpu_s": held, "seconds": seconds, "waiters": waiters}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rabbitmq", default="127.0.0.1:5672")
    parser.add_argument("--systems", default="taskhoster,beanstalkd,rabbitmq")
    parser.add_argument("--waiters", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="at most 50")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    python = client_python()
    wanted = args.systems.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="th-servers-bench-"))
    server = Server(workers=2, threads=configured_threads(), fsync=True)
    beanstalk: subprocess.Popen[bytes] | None = None
    try:
        systems: list[System] = []
        if "taskhoster" in wanted:
            server.prepare()
            server.start()
            systems.append(
                System(
                    "taskhoster",
                    server.url,
                    server.cpu_seconds,
                    env={"TASKHOSTER_BENCH_TOKEN": server.tokens["worker"]},
                )
            )
            # the worker's token may post too: one token for both sides of the bench
            server.manage("grant", "worker", f"{HOST}/{QUEUE}", "producer")
        if "beanstalkd" in wanted:
            beanstalk, port = start_beanstalkd(tmp)
            pid = beanstalk.pid
            systems.append(System("beanstalkd", f"127.0.0.1:{port}", lambda: process_cpu(pid),
                                  batches=False))  # fmt: skip
        if "rabbitmq" in wanted:
            beam = find_process("beam.smp")
            if beam is None:
                raise SystemExit("RabbitMQ is not running (no beam.smp process)")
            systems.append(System("rabbitmq", args.rabbitmq, lambda: process_cpu(beam),
                                  stop_messages=True))  # fmt: skip
        results: dict[str, dict[str, list[dict[str, Any]]]] = {s.name: {} for s in systems}
        for round_no in range(args.rounds):
            turn = systems[round_no % len(systems) :] + systems[: round_no % len(systems)]
            for system in turn:
                for shape, batch, consumers in SHAPES:
                    if batch > 1 and not system.batches:
                        continue
                    got = one_shape(python, system, round_no, shape, batch, consumers,
                                    args.tasks)  # fmt: skip
                    results[system.name].setdefault(shape, []).append(got)
                    print(
                        f"round {round_no + 1} {system.name:<10} {shape:<8} "
                        f"post {got['post_per_s']:8.0f}/s  drain {got['drain_per_s']:8.0f}/s  "
                        f"server CPU {got['cpu_per_1000']:.2f} s per 1,000",
                        flush=True,
                    )
        waiting = None
        if "taskhoster" in wanted and args.waiters:
            waiting = idle_with_waiters(server, args.waiters, args.idle_seconds)
    finally:
        server.stop()
        if beanstalk is not None:
            beanstalk.send_signal(signal.SIGTERM)
            beanstalk.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    report = {"tasks": args.tasks, "rounds": args.rounds, "results": results,
              "waiting": waiting, "load": os.getloadavg()}  # fmt: skip
    print_report(report, args)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def _ratio(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str) -> float:
    """The median of the rounds' ratios (round i of one beside round i of the other)."""
    return statistics.median(a[key] / b[key] for a, b in zip(ours, theirs, strict=True))


def print_report(report: dict[str, Any], args: argparse.Namespace) -> None:
    results = report["results"]
    print(f"\n$ {' '.join([sys.executable, *sys.argv])}")
    load = ", ".join(f"{x:.1f}" for x in report["load"])
    print(
        f"{report['tasks']:,} tasks, {report['rounds']} rounds, systems in turn; loopback; "
        f"2-core machine shared with other work (load average at the end {load})\n"
    )
    print(f"{'system':<11} {'shape':<8} {'post/s':>8} {'drain/s':>8} "
          f"{'server CPU s per 1,000 (post + drain)':>40}")  # fmt: skip
    for name, shapes in results.items():
        for shape, rows in shapes.items():
            cpu = (f"{_median(rows, 'cpu_per_1000'):.2f} ({_median(rows, 'post_cpu_per_1000'):.2f}"
                   f" + {_median(rows, 'drain_cpu_per_1000'):.2f})")  # fmt: skip
            print(f"{name:<11} {shape:<8} {_median(rows, 'post_per_s'):>8.0f} "
                  f"{_median(rows, 'drain_per_s'):>8.0f} {cpu:>40}")  # fmt: skip
    ours = results.get("taskhoster", {})
    print()
    for peer in ("beanstalkd", "rabbitmq"):
        for shape, rows in ours.items():
            theirs = results.get(peer, {}).get(shape)
            if not theirs:
                continue
            print(f"taskhoster vs {peer:<10} {shape:<8} drain "
                  f"{_ratio(rows, theirs, 'drain_per_s'):.2f}x, post "
                  f"{_ratio(rows, theirs, 'post_per_s'):.2f}x, server CPU "
                  f"{_ratio(rows, theirs, 'cpu_per_1000'):.1f}x")  # fmt: skip
    waiting = report.get("waiting")
    if waiting:
        per_s = 1000 / waiting["seconds"]
        print(f"\ntaskhoster's server CPU idle: {waiting['idle_cpu_s'] * per_s:.1f} ms a second; "
              f"with {waiting['waiters']} claims held waiting: "
              f"{waiting['waiting_cpu_s'] * per_s:.1f} ms a second "
              f"(over {waiting['seconds']:.0f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
