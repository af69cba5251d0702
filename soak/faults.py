"""The fault injector: a seeded, shuffled list of faults applied one at a time, evenly over the
fault phase, each noted in faults.jsonl (op, t, and what it planted or killed).

Disk faults hold for a short random time and are always undone (a fill freed, a read-only
mount made writable again, a failed logs disk checked and mounted again) before the next one,
and in the runner's `finally` by `undo`. The logs disk's read-only fault is an ext4 error where
the logs disk is ext4 (mounts.py); a tmpfs's read-only remount is refused by the kernel while a
process holds a file there open for writing: it is tried for 2 s and otherwise noted as not
applied.
Planted files (FIFOs, corrupt, truncated, foreign, another queue's record) are left for the
sweep: the checks want them out of the state directories once the faults end. So are the
directories, FIFOs and symlinks planted where the store keeps its own files beside them (a
task's waiters in dependents/, a group or a group's count, owner, members/... in groups/, a key
in keys/): the checks want them moved aside too, and the pass that meets them must go on. Control
characters go in every text field a request has; whatever the server answers is judged like any
other answer (a 5xx other than a 503 fails the run), and a task it accepts must end like any.
The only processes the injector kills are serve's sweep and ingester children, once each,
told to the watcher first: a death the soak caused, which serve must repair.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

from chaos.server import HOST, QUEUE
from chaos.worker import Log
from taskhoster.client import ApiError, Client

from .load import TASKS_PATH, Context, Errors, code_of
from .mounts import Mounts
from .system import SoakServer, Watcher

# how many of each fault one `--faults-scale` of 1 gives (the long form scales it up)
BASE_COUNTS = {
    "fill_items": 3,
    "fill_logs": 3,
    "ro_logs": 3,
    "ro_items": 2,
    "fifo_pending": 2,
    "fifo_processing": 2,
    "corrupt": 3,
    "truncated": 3,
    "foreign": 2,
    "other_queue": 2,
    "beside_dependents": 2,
    "beside_groups": 2,
    "beside_keys": 2,
    "control_chars": 12,
}
# what is planted where the store keeps its own files beside the state directories
BESIDE_KINDS = ("directory", "fifo", "symlink")
# a group's entries: the store's files, and its two directories
GROUP_FILES = ("count", "owner", "closing", "closed", "callback", "unfinished")
GROUP_DIRS = ("members", "ended")
ONCE = ("kill_sweep", "kill_ingest")
WARM_UP_SECONDS = 30
CONTROL = "\x00\x01\x07\x08\x0b\x0c\x1b[31m\x7f\u2028\ufeff"


def new_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(64):016x}"


class Injector:
    def __init__(
        self,
        run_dir: Path,
        server: SoakServer,
        watcher: Watcher,
        mounts: Mounts,
        ctx: Context,
        *,
        seed: int,
        scale: int,
        kill_children: bool,
    ) -> None:
        self.server, self.watcher, self.mounts, self.ctx = server, watcher, mounts, ctx
        self.rng = random.Random(seed ^ 0x5EED)  # noqa: S311 (seeded, to replay a run; not security)
        ops = [op for op, n in BASE_COUNTS.items() for _ in range(n * scale)]
        self.rng.shuffle(ops)
        if kill_children:
            # past the middle, so that the other faults meet the first sweep and ingester too
            for op in ONCE:
                ops.insert(self.rng.randrange(len(ops) // 2, len(ops) + 1), op)
        self.ops = ops
        self.log = Log(str(run_dir / "faults.jsonl"))
        self.log_dir = run_dir
        self.queue_dir = server.items / HOST / QUEUE
        self.done: dict[str, int] = {}
        self.hostile = Hostile(ctx, self.rng)

    def note(self, op: str, **detail: Any) -> None:
        self.log.write(op=op, t=time.time(), **detail)

    def warm_up(self, until: float) -> None:
        """Wait for the load's first claims: the faults meet a serving system with its queue
        directories made and every child of serve past its start."""
        while time.monotonic() < until and not self.ctx.over():
            try:
                if any(os.scandir(self.queue_dir / "done")):
                    return
            except OSError:
                pass
            time.sleep(0.2)

    def run(self, until: float) -> None:
        """Every fault, spread evenly up to `until` (monotonic), then every disk fault undone."""
        self.warm_up(min(until, time.monotonic() + WARM_UP_SECONDS))
        start = time.monotonic()
        gap = max(0.2, (until - start) / max(1, len(self.ops)))
        try:
            for i, op in enumerate(self.ops):
                due = start + i * gap
                while time.monotonic() < due and not self.ctx.over():
                    time.sleep(0.05)
                if self.ctx.over() or time.monotonic() >= until:
                    break
                try:
                    getattr(self, op)()
                except Exception as exc:  # one fault's failure is noted, not the run's end
                    self.note(op, error=f"{type(exc).__name__}: {exc}")
                    continue
                self.done[op] = self.done.get(op, 0) + 1
        finally:
            self.undo()
            self.note("faults_end", done=self.done)

    def undo(self) -> None:
        for directory in (self.server.items, self.server.logs):
            self.mounts.free(directory)
            with contextlib.suppress(OSError):
                if directory in self.mounts.failed:
                    self.mounts.mount_again(directory)
                elif directory not in self.mounts.images:
                    self.mounts.read_write(directory)

    def hold(self) -> float:
        seconds = self.rng.uniform(1.0, 3.0)
        time.sleep(seconds)
        return round(seconds, 2)

    # -- the disks ------------------------------------------------------------------------

    def fill_items(self) -> None:
        written = self.mounts.fill(self.server.items)
        self.note("fill_items", bytes=written, held=self.hold())
        self.mounts.free(self.server.items)

    def fill_logs(self) -> None:
        written = self.mounts.fill(self.server.logs)
        self.note("fill_logs", bytes=written, held=self.hold())
        self.mounts.free(self.server.logs)

    def _read_only(self, op: str, directory: Path) -> None:
        tries = self.mounts.read_only(directory)
        try:
            self.note(op, tries=tries, held=self.hold())
        finally:
            self.mounts.read_write(directory)

    def ro_logs(self) -> None:
        logs = self.server.logs
        if logs not in self.mounts.images:
            self._read_only("ro_logs", logs)
            return
        self.mounts.fail(logs)  # ext4's error: read-only under the open day-files too
        try:
            self.note("ro_logs", how="ext4 error, then checked and mounted again",
                      held=self.hold())  # fmt: skip
        finally:
            self.mounts.mount_again(logs)

    def ro_items(self) -> None:
        self._read_only("ro_items", self.server.items)

    # -- planted files ----------------------------------------------------------------------

    def plant(self, op: str, state: str, name: str, data: bytes | None) -> None:
        path = self.queue_dir / state / name
        if data is None:
            os.mkfifo(path, 0o644)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        self.note(op, state=state, name=name)

    def real_record(self) -> bytes | None:
        """A task file's bytes from pending/ or processing/ (None when none could be read)."""
        for state in ("pending", "processing"):
            try:
                entries = list(os.scandir(self.queue_dir / state))
            except OSError:
                continue
            self.rng.shuffle(entries)
            for entry in entries[:5]:
                if not entry.is_file(follow_symlinks=False):
                    continue  # a planted FIFO: opening it would wait for a writer
                try:
                    data = Path(entry.path).read_bytes()
                    json.loads(data)
                except (OSError, ValueError):
                    continue
                return data
        return None

    def fifo_pending(self) -> None:
        self.plant("fifo_pending", "pending", f"{new_id(self.rng)}.json", None)

    def fifo_processing(self) -> None:
        self.plant("fifo_processing", "processing", f"{new_id(self.rng)}.json", None)

    def corrupt(self) -> None:
        tid = new_id(self.rng)
        data = b'{"id": "' + tid.encode() + b'", "status": "pend\x00\xff{{'
        self.plant("corrupt", self.rng.choice(("pending", "processing")), f"{tid}.json", data)

    def truncated(self) -> None:
        real = self.real_record()
        tid = new_id(self.rng)
        if real is None:
            real = json.dumps({"id": tid, "host": HOST, "queue": QUEUE, "status": "pending"})
            real = real.encode()
        record = json.loads(real)
        record["id"] = tid
        data = json.dumps(record).encode()
        cut = data[: self.rng.randrange(1, max(2, len(data) - 1))]
        self.plant("truncated", self.rng.choice(("pending", "processing")), f"{tid}.json", cut)

    def foreign(self) -> None:
        state = self.rng.choice(("pending", "processing"))
        self.plant("foreign", state, f"notes-{new_id(self.rng)[:6]}.txt", b"not a task\n")

    def other_queue(self) -> None:
        real = self.real_record()
        if real is None:
            self.note("other_queue", skipped="no record to copy")
            return
        record = json.loads(real)
        tid = new_id(self.rng)
        record.update(id=tid, queue="elsewhere", host="other.example.com")
        data = json.dumps(record).encode()
        self.plant("other_queue", self.rng.choice(("pending", "processing")), f"{tid}.json", data)

    # -- entries planted beside the state directories ---------------------------------------

    def plant_beside(self, op: str, path: Path, kind: str) -> None:
        """A directory, a FIFO or a symlink (to a FIFO outside the store: a store that followed
        it would block) at `path`."""
        if kind == "directory":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path, 0o644)
        else:
            target = self.log_dir / f"planted-target-{new_id(self.rng)}"
            os.mkfifo(target, 0o644)
            path.symlink_to(target)
        self.note(op, path=str(path.relative_to(self.queue_dir)), kind=kind)

    def pending_id(self) -> str:
        """The id of a task in pending/ (a fresh one when none is there)."""
        with contextlib.suppress(OSError):
            names = [e.name for e in os.scandir(self.queue_dir / "pending")
                     if e.name.endswith(".json") and len(e.name) == 21]  # fmt: skip
            if names:
                return self.rng.choice(names)[:16]
        return new_id(self.rng)

    def beside_dependents(self) -> None:
        """As the waiters of a pending task (met when it ends) or of no task."""
        task_id = self.pending_id() if self.rng.random() < 0.5 else new_id(self.rng)
        kind = self.rng.choice(BESIDE_KINDS)
        self.plant_beside("beside_dependents", self.queue_dir / "dependents" /
                          f"{task_id}.waiters", kind)  # fmt: skip

    def beside_groups(self) -> None:
        """As a group (anything but a directory), or as an entry of a group made for it."""
        groups = self.queue_dir / "groups"
        groups.mkdir(exist_ok=True)
        name = f"soak-{new_id(self.rng)[:8]}"
        if self.rng.random() < 0.3:
            kind = self.rng.choice(("fifo", "symlink"))
            self.plant_beside("beside_groups", groups / name, kind)
            return
        (groups / name).mkdir()
        entry = self.rng.choice(GROUP_FILES + GROUP_DIRS)
        kinds = BESIDE_KINDS if entry in GROUP_FILES else ("fifo", "symlink")
        self.plant_beside("beside_groups", groups / name / entry, self.rng.choice(kinds))

    def beside_keys(self) -> None:
        """Under a key's name (32 hex digits and .json) that no post of the load uses."""
        name = f"{self.rng.getrandbits(128):032x}.json"
        kind = self.rng.choice(BESIDE_KINDS)
        self.plant_beside("beside_keys", self.queue_dir / "keys" / name, kind)

    # -- requests ----------------------------------------------------------------------------

    def control_chars(self) -> None:
        variant, outcome = self.hostile.one()
        self.note("control_chars", variant=variant, outcome=outcome)

    # -- serve's children -----------------------------------------------------------------------

    def _kill_child(self, op: str, kind: str) -> None:
        pid = self.server.child_pid(kind)
        if pid is None:
            self.note(op, skipped=f"no {kind} child")
            return
        self.watcher.expect_death(pid)
        os.kill(pid, signal.SIGKILL)
        self.note(op, pid=pid, kind=kind)

    def kill_sweep(self) -> None:
        self._kill_child("kill_sweep", "sweep")

    def kill_ingest(self) -> None:
        self._kill_child("kill_ingest", "ingest")


class Hostile:
    """Requests with control characters in each text field: worker names, idempotency keys (in
    the header and in a batch entry), items, progress, results and failure reasons, query
    values and ids. Posts and claims it makes are logged like the load's (load/hostile.jsonl),
    so a task the server accepted is held to the same checks."""

    def __init__(self, ctx: Context, rng: random.Random) -> None:
        self.ctx, self.rng = ctx, rng
        self.log = Log(str(ctx.load_dir / "hostile.jsonl"))
        self.producer = Client(ctx.url, token=ctx.tokens["paul"], timeout=15)
        self.work_client = Client(ctx.url, token=ctx.tokens["wendy"], timeout=15)
        self.n = 0

    def one(self) -> tuple[str, str]:
        variant = self.rng.choice(
            ("worker", "key_header", "key_batch", "item", "reports", "query", "path")
        )
        try:
            return variant, getattr(self, variant)()
        except ApiError as exc:
            if exc.status >= 500:
                self.log.write(e="http", s=exc.status, code=exc.code, op=variant, t=time.time())
            return variant, f"{exc.status} {exc.code}"
        except (*Errors, ValueError) as exc:
            return variant, code_of(exc) if not isinstance(exc, ValueError) else "client refused"

    def ctl(self, base: str) -> str:
        chars = list(CONTROL)
        self.rng.shuffle(chars)
        return base + "".join(chars[: self.rng.randint(1, len(chars))])

    def post(
        self,
        body: Any,
        headers: dict[str, str] | None = None,
        key: str | None = None,
        query: dict[str, str] | None = None,
    ) -> str:
        if key is not None:
            self.log.write(e="intent", key=key, t=time.time())
        try:
            status, _, task = self.producer.request(
                "POST", TASKS_PATH, body=body, headers=headers or {}, query=query
            )
        except ApiError:
            raise
        except Errors:
            self.log.write(e="maybe", key=key, t=time.time())
            raise
        self.log.write(e="ack", key=key, id=task["id"], s=status, t=time.time())
        return str(status)

    def worker(self) -> str:
        name = self.ctl("hostile-")
        task = self.work_client.claim(HOST, QUEUE, name, wait=0, lease=self.ctx.lease)
        if not isinstance(task, dict):
            return "no task"
        self.log.write(e="claim", id=task["id"], a=task["attempts"], w=name, t=time.time())
        self.finish(task, name)
        return "claimed with it"

    def finish(self, task: dict[str, Any], name: str) -> None:
        tid, attempt = task["id"], int(task["attempts"])
        try:
            self.work_client.result(HOST, QUEUE, tid, name, attempt, {"by": self.ctl("r")})
            status = "ok"
        except Errors as exc:
            status = code_of(exc)
        self.log.write(e="end", id=tid, a=attempt, how="result", s=status, t=time.time())

    def key_header(self) -> str:
        key = self.ctl("k")
        return self.post({"hostile": 1}, headers={"Idempotency-Key": key}, key=key)

    def key_batch(self) -> str:
        key = self.ctl("b")
        self.log.write(e="intent", key=key, t=time.time())
        answer = self.producer.post_many(
            HOST, QUEUE, [{"item": {"hostile": 2}, "idempotencyKey": key}]
        )
        for task in answer:
            self.log.write(e="ack", key=key, id=task["id"], s=201, t=time.time())
        return "201"

    def item(self) -> str:
        body = {self.ctl("f"): self.ctl("v"), "nested": [self.ctl(""), {"x": self.ctl("y")}]}
        return self.post(body)

    def reports(self) -> str:
        """A claim under a plain name, then progress, and a failure whose reason (and a second
        try under a name with control characters) carry them."""
        name = "hostile-plain"
        task = self.work_client.claim(HOST, QUEUE, name, wait=0, lease=self.ctx.lease)
        if not isinstance(task, dict):
            return "no task"
        tid, attempt = task["id"], int(task["attempts"])
        self.log.write(e="claim", id=tid, a=attempt, w=name, t=time.time())
        answers = []
        for call in (
            lambda: self.work_client.progress(HOST, QUEUE, tid, name, attempt, {"p": self.ctl("")}),
            lambda: self.work_client.fail(HOST, QUEUE, tid, self.ctl(name), attempt, {"e": "x"}),
        ):
            try:
                call()
                answers.append("ok")
            except ApiError as exc:
                if exc.status >= 500:
                    self.log.write(e="http", s=exc.status, code=exc.code, op="reports")
                answers.append(str(exc.status))
        reason = {"error": self.ctl("E"), "traceback": self.ctl("T")}
        try:
            self.work_client.fail(HOST, QUEUE, tid, name, attempt, reason)
            status = "ok"
        except Errors as exc:
            status = code_of(exc)
            if isinstance(exc, ApiError) and exc.status >= 500:
                self.log.write(e="http", s=exc.status, code=exc.code, op="fail")
        self.log.write(e="end", id=tid, a=attempt, how="fail", s=status, t=time.time())
        return f"progress/bad-name fail: {'/'.join(answers)}; fail: {status}"

    def query(self) -> str:
        return self.post({"q": 1}, query={"delay": self.ctl("1"), "priority": "\x00"})

    def path(self) -> str:
        bad = self.ctl("0123456789abcdef")
        status, _, _ = self.producer.request("GET", TASKS_PATH + "/" + bad.encode().hex())
        status2, _, _ = self.producer.request("GET", TASKS_PATH + "/%00abcdef0123456789")
        return f"{status} {status2}"
