"""The worker fleet and the nemesis that kills, pauses and restarts processes at random.

The nemesis runs in the runner's own process as a bounded loop. Its operations are shuffled
once from the seed and paced by the run's progress (the count of done tasks), so that kills
land all along the work instead of in its first seconds; a stalled run still moves on after
`max_gap` seconds, so the nemesis always ends.

With a private PostgreSQL cluster (`--store postgres`) it also restarts the database: mostly
crashes (every postgres process SIGKILLed), every third one a fast shutdown, each followed by a
short random time down before the cluster starts again on the same data dir and port.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from .pgcluster import PgCluster
from .server import HOST, QUEUE, ROOT, Server, kill_group

_TASK_ROW = "SELECT status, record FROM th_tasks WHERE host = %s AND queue = %s AND id = %s"
RECENT_START_SECONDS = 1.0  # a worker just started or resumed is left to report first


@dataclass
class Slot:
    index: int
    generation: int = 0
    proc: subprocess.Popen[bytes] | None = None
    name: str = ""
    started: float = 0.0
    paused_until: float | None = None  # monotonic time of its SIGCONT, at the soonest
    pause_deadline: float = 0.0  # ... and at the latest
    paused_task: str = ""

    @property
    def flag(self) -> str:
        return f"w{self.index}.flag"


class Fleet:
    """The worker processes, one slot each; a killed worker is replaced under a new name, so
    the fencing by worker name and attempt is exercised across incarnations."""

    def __init__(self, run_dir: Path, server: Server, size: int, lease: int) -> None:
        self.dir = run_dir / "workers"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.server, self.lease = server, lease
        self.slots = [Slot(i) for i in range(size)]

    def start(self, slot: Slot) -> None:
        slot.generation += 1
        slot.name = f"w{slot.index}-g{slot.generation}"
        argv = [
            sys.executable,
            "-m",
            "chaos.worker",
            "--url",
            self.server.url,
            "--token",
            self.server.tokens["wendy"],
            "--name",
            slot.name,
            "--log",
            str(self.dir / f"{slot.name}.jsonl"),
            "--flag",
            str(self.dir / slot.flag),
            "--lease",
            str(self.lease),
        ]
        with open(self.dir / f"{slot.name}.err", "wb") as err:
            slot.proc = subprocess.Popen(argv, cwd=ROOT, start_new_session=True, stderr=err)  # noqa: S603 (argv is ours)
        slot.started, slot.paused_until = time.monotonic(), None

    def start_all(self) -> None:
        for slot in self.slots:
            self.start(slot)

    def holding(self, slot: Slot) -> str:
        """The id of the task the worker holds ("" when none); exact while it is stopped."""
        try:
            data = (self.dir / slot.flag).read_bytes()
        except FileNotFoundError:
            return ""  # a worker slow to start (a loaded machine) has not written it yet
        return data[1:17].decode().strip() if data[:1] == b"1" else ""

    def stop_all(self, grace: float = 5.0) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                kill_group(slot.proc, signal.SIGCONT)
                kill_group(slot.proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for slot in self.slots:
            if slot.proc is not None:
                try:
                    slot.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    kill_group(slot.proc)

    def kill_all(self) -> None:
        for slot in self.slots:
            kill_group(slot.proc)


def ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class Nemesis:
    def __init__(
        self,
        run_dir: Path,
        server: Server,
        fleet: Fleet,
        *,
        seed: int,
        kills: int,
        pauses: int,
        web_kills: int,
        sweep_kills: int,
        pause_seconds: float,
        sweep_interval: float,
        max_gap: float,
        pg: PgCluster | None = None,
        pg_restarts: int = 0,
        pg_down_seconds: float = 3.0,
    ) -> None:
        self.server, self.fleet = server, fleet
        self.pg, self.pg_down_seconds = pg, pg_down_seconds
        self.rng = random.Random(seed)  # noqa: S311 (seeded, to replay a run; not security)
        ops = ["kill"] * kills + ["pause"] * pauses + ["web"] * web_kills + ["sweep"] * sweep_kills
        ops += ["pg"] * (pg_restarts if pg is not None else 0)
        self.rng.shuffle(ops)
        self.ops = ops
        self.pause_seconds, self.sweep_interval, self.max_gap = (
            pause_seconds,
            sweep_interval,
            max_gap,
        )
        self.log = open(run_dir / "nemesis.jsonl", "a", buffering=1)  # noqa: SIM115 (open for the whole run)
        self.done: dict[str, int] = {"kill": 0, "pause": 0, "web": 0, "sweep": 0}
        if pg is not None:
            self.done["pg"] = 0
        self.missed: dict[str, int] = {"pause": 0, "web": 0}
        # Processes that died without the nemesis killing them: each fails the run, since a
        # restart that hid it (a sweep loop that crashed under load) would hide a real bug.
        self.deaths: list[str] = []
        self._web_seen: set[int] = set()
        self._web_killed: set[int] = set()

    def note(self, **line: Any) -> None:
        self.log.write(json.dumps({"t": time.time(), **line}) + "\n")

    def _died_by_itself(self, what: str, returncode: int | None = None) -> None:
        how = "" if returncode is None else f" ({ended(returncode)})"
        self.deaths.append(what + how)
        self.note(op="unexplained_death", what=what, rc=returncode)

    # -- the housekeeping every loop turn does ----------------------------------------------

    def tend(self) -> None:
        """Resume pauses that are due; replace a worker and restart a sweep loop that died by
        themselves, each recorded in `deaths`, as is a web worker gone that it did not kill."""
        now = time.monotonic()
        for slot in self.fleet.slots:
            if slot.paused_until is not None and now >= slot.paused_until:
                # Resume once the sweep has taken the task back (or at the deadline): a late
                # result is refused only when someone else holds the attempt, and a sweep
                # restarting after a kill may take seconds; the store says when it has.
                state = self._pause_state(slot)
                if state == "held" and now < slot.pause_deadline:
                    continue
                kill_group(slot.proc, signal.SIGCONT)
                self.note(
                    op="resume",
                    worker=slot.name,
                    task=slot.paused_task,
                    state=state,
                    requeued=state == "requeued",
                )
                slot.paused_until, slot.started = None, now
            elif slot.proc is not None and slot.proc.poll() is not None:
                # the nemesis replaces a worker it kills at once: this one died by itself
                self._died_by_itself(f"worker {slot.name}", slot.proc.returncode)
                self.fleet.start(slot)
        sweeper = self.server.sweeper
        if sweeper is not None and sweeper.poll() is not None:
            self._died_by_itself("sweep loop", sweeper.returncode)
            self.server.start_sweeper(self.sweep_interval)  # the run goes on, to find the rest
        gunicorn = self.server.gunicorn
        if gunicorn is not None and gunicorn.poll() is not None:
            self._died_by_itself("gunicorn master", gunicorn.returncode)
            raise RuntimeError(
                f"the gunicorn master died ({ended(gunicorn.returncode)}): the nemesis never "
                "kills it"
            )
        web = set(self.server.web_pids())
        for pid in sorted(self._web_seen - web - self._web_killed):
            self._died_by_itself(f"web worker pid {pid}")  # its master reaped it: no status
        self._web_seen = web

    # -- the operations -----------------------------------------------------------------------

    def _pause_state(self, slot: Slot) -> str:
        """ "held": the store still shows the paused worker's lease; "finished": its result
        landed before the stop (it was waiting for the answer); else "requeued"."""
        if self.server.pg_dsn:
            return self._pg_pause_state(slot)
        base = self.server.items / HOST / QUEUE
        for directory, field in (("processing", "lease"), ("done", "result")):
            try:
                record = json.loads((base / directory / f"{slot.paused_task}.json").read_bytes())
            except (OSError, ValueError):
                continue
            mark = record.get(field) or {}
            if isinstance(mark, dict) and slot.name in (mark.get("worker"), mark.get("by")):
                return "held" if directory == "processing" else "finished"
        return "requeued"

    def _pg_pause_state(self, slot: Slot) -> str:
        """The same, from the task's row; "held" while the database cannot say (it is down)."""
        try:
            with psycopg.connect(self.server.pg_dsn or "", connect_timeout=2) as conn:
                row = conn.execute(_TASK_ROW, (HOST, QUEUE, slot.paused_task)).fetchone()
        except psycopg.Error:
            return "held"
        if row is None:
            return "requeued"
        status, record = row
        record = json.loads(record) if isinstance(record, str) else record
        field = {"processing": "lease", "finished": "result"}.get(status)
        mark = record.get(field) if field else None
        if isinstance(mark, dict) and slot.name in (mark.get("worker"), mark.get("by")):
            return "held" if status == "processing" else "finished"
        return "requeued"

    def _runnable(self) -> list[Slot]:
        now = time.monotonic()
        return [
            s
            for s in self.fleet.slots
            if s.paused_until is None and now - s.started >= RECENT_START_SECONDS
        ]

    def kill(self) -> bool:
        slots = self._runnable()
        if not slots:
            return False
        slot = self.rng.choice(slots)
        kill_group(slot.proc)
        self.note(op="kill", worker=slot.name)
        self.fleet.start(slot)
        return True

    def pause(self) -> bool:
        """SIGSTOP a worker that holds a task, for longer than the lease plus a sweep."""
        paused = sum(s.paused_until is not None for s in self.fleet.slots)
        if paused >= max(1, len(self.fleet.slots) // 2):
            return False  # keep half the fleet working
        for _ in range(20):
            slots = self._runnable()
            if not slots:
                return False
            slot = self.rng.choice(slots)
            kill_group(slot.proc, signal.SIGSTOP)
            task = self.fleet.holding(slot)
            if task:
                slot.paused_until = time.monotonic() + self.fleet.lease + 0.5
                slot.pause_deadline = time.monotonic() + self.pause_seconds
                slot.paused_task = task
                self.note(op="pause", worker=slot.name, task=task, seconds=self.pause_seconds)
                return True
            kill_group(slot.proc, signal.SIGCONT)
            time.sleep(0.02)
        return False

    def web(self) -> bool:
        pids = self.server.web_pids()
        if len(pids) < self.server.web_workers:
            return False  # the master is still replacing one: never leave it none
        pid = self.rng.choice(pids)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        self._web_killed.add(pid)
        self.note(op="web_kill", pid=pid)
        return True

    def sweep(self) -> bool:
        kill_group(self.server.sweeper)
        self.note(op="sweep_kill")
        self.server.start_sweeper(self.sweep_interval)
        return True

    def pg_restart(self) -> bool:
        """Crash the database (or, every third time, stop it fast), down 0.5 s to
        `pg_down_seconds`, then start it again on the same data dir and port."""
        assert self.pg is not None, "a pg operation is only drawn with a cluster"
        crash = self.pg.restarts % 3 != 2
        down = self.rng.uniform(0.5, self.pg_down_seconds)
        started = time.monotonic()
        self.pg.restart(crash=crash, pause=down)
        self.note(
            op="pg_crash" if crash else "pg_fast_stop",
            down=round(down, 2),
            seconds=round(time.monotonic() - started, 2),
        )
        return True

    def run(self, progress: Callable[[], float], deadline: float) -> None:
        """Do every operation, op i once `progress()` reaches i/len(ops) (or max_gap passed)."""
        actions = {
            "kill": self.kill,
            "pause": self.pause,
            "web": self.web,
            "sweep": self.sweep,
            "pg": self.pg_restart,
        }
        last = time.monotonic()
        i = 0
        while i < len(self.ops) and time.monotonic() < deadline:
            self.tend()
            now = time.monotonic()
            due = progress() >= 0.95 * i / len(self.ops) or now - last >= self.max_gap
            if due and now - last >= 0.1:
                op = self.ops[i]
                if actions[op]():
                    self.done[op] += 1
                    i, last = i + 1, now
                elif now - last >= 3 * self.max_gap:
                    self.missed[op] = self.missed.get(op, 0) + 1  # no target for it: skip it
                    self.note(op="skipped", kind=op)
                    i, last = i + 1, now
            time.sleep(0.05)
        self.note(op="nemesis_end", done=self.done, missed=self.missed, left=len(self.ops) - i)

    def settle_pauses(self, deadline: float) -> None:
        """After the last operation: resume the paused workers when due, replace dead ones."""
        while time.monotonic() < deadline and any(
            s.paused_until is not None for s in self.fleet.slots
        ):
            self.tend()
            time.sleep(0.05)
