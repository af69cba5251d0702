"""The soak's mixed load: posters, claimers, event-stream readers, and the slow webhook receiver.

Each loop is a thread of the runner (the load is moderate; the server is what is busy) with a
JSONL log of its own in the run's load/ directory, in one vocabulary the checks read:

- `intent` (key) before a keyed post's first try; `ack` (key or null, id, s) after a 2xx;
  `maybe` for a keyless post whose answer was lost (it may have landed); `gaveup` (key).
- `claim` (id, a, w) and `end` (id, a, how: result | fail | retry | abandon, s: ok or a code).
- `http` (s, code, op) for every 5xx answer; `requests` (n) at the loop's end.
- `sse` (events, bad, reconnects) at a reader's end, `sse_bad` (raw) for a line it could not
  parse.

Every loop stops by itself at its `stop` event or the run's deadline; they talk to 127.0.0.1
only.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.server import HOST, QUEUE
from chaos.worker import Log
from taskhoster.client import ApiError, Client

TASKS_PATH = f"/queues/{HOST}/{QUEUE}/tasks"
RETRY_SECONDS = 60.0  # one post's or report's retries stop after this
Errors = (ApiError, OSError, http.client.HTTPException)


@dataclass
class Context:
    url: str
    tokens: dict[str, str]
    lease: int
    load_dir: Path
    pending_dir: Path
    deadline: float  # monotonic: nothing runs past it
    stop_posting: threading.Event = field(default_factory=threading.Event)
    draining: threading.Event = field(default_factory=threading.Event)  # no abandons, no retries
    stop_all: threading.Event = field(default_factory=threading.Event)

    def over(self) -> bool:
        return self.stop_all.is_set() or time.monotonic() >= self.deadline


def code_of(exc: BaseException) -> str:
    return exc.code if isinstance(exc, ApiError) else f"conn:{type(exc).__name__}"


def retryable(exc: BaseException) -> bool:
    return not isinstance(exc, ApiError) or exc.status >= 500


class Loop(threading.Thread):
    def __init__(self, name: str, ctx: Context, seed: int, token: str) -> None:
        super().__init__(name=name, daemon=True)
        self.ctx = ctx
        self.rng = random.Random(seed)  # noqa: S311 (seeded, to replay a run; not security)
        self.log = Log(str(ctx.load_dir / f"{name}.jsonl"))
        self.client = Client(ctx.url, token=token, timeout=15)
        self.requests = 0

    def call(self, op: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One request through `fn`; a 5xx is logged (the checks judge it) and raised."""
        self.requests += 1
        try:
            return fn(*args, **kwargs)
        except ApiError as exc:
            if exc.status >= 500:
                self.log.write(e="http", s=exc.status, code=exc.code, op=op, t=time.time())
            raise

    def retrying(self, op: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`call` again on a broken connection or a 5xx (the same request: safe to repeat)."""
        give_up = time.monotonic() + RETRY_SECONDS
        tries = 0
        while True:
            tries += 1
            try:
                return self.call(op, fn, *args, **kwargs)
            except Errors as exc:
                if not retryable(exc) or time.monotonic() > min(give_up, self.ctx.deadline):
                    raise
                time.sleep(min(1.0, 0.05 * 2 ** min(tries, 5)) * self.rng.uniform(0.5, 1.5))

    def run(self) -> None:
        try:
            self.body()
        finally:
            self.log.write(e="requests", n=self.requests, t=time.time())

    def body(self) -> None:
        raise NotImplementedError


def pending_count(pending_dir: Path) -> int:
    try:
        return sum(1 for e in os.scandir(pending_dir) if e.name.endswith(".json"))
    except OSError:
        return 0


class Poster(Loop):
    """Single posts with and without an Idempotency-Key, and batches of 20 keyed entries."""

    def __init__(self, name: str, ctx: Context, seed: int, backlog: int, pace: float) -> None:
        super().__init__(name, ctx, seed, ctx.tokens["paul"])
        self.backlog, self.pace, self.n = backlog, pace, 0

    def key(self) -> str:
        self.n += 1
        return f"{self.name}-{self.n}"

    def body(self) -> None:
        while not self.ctx.stop_posting.is_set() and not self.ctx.over():
            if pending_count(self.ctx.pending_dir) > self.backlog:
                time.sleep(0.2)
                continue
            draw = self.rng.random()
            if draw < 0.5:
                self.keyed()
            elif draw < 0.7:
                self.keyless()
            else:
                self.batch()
            time.sleep(self.rng.uniform(0.5, 1.5) * self.pace)

    def item(self) -> dict[str, Any]:
        return {"n": self.n, "by": self.name, "work_ms": self.rng.randint(0, 80)}

    def keyed(self) -> None:
        key = self.key()
        self.log.write(e="intent", key=key, t=time.time())
        try:
            status, _, task = self.retrying(
                "post",
                self.client.request,
                "POST",
                TASKS_PATH,
                body=self.item(),
                headers={"Idempotency-Key": key},
            )
        except Errors as exc:
            self.log.write(e="gaveup", key=key, err=code_of(exc), t=time.time())
            return
        self.log.write(e="ack", key=key, id=task["id"], s=status, t=time.time())

    def keyless(self) -> None:
        self.n += 1
        try:
            status, _, task = self.call(
                "post", self.client.request, "POST", TASKS_PATH, body=self.item()
            )
        except ApiError as exc:
            # a refusal (a 503 included) acknowledged nothing: no task was made
            self.log.write(e="refused", s=exc.status, code=exc.code, t=time.time())
            return
        except Errors as exc:
            self.log.write(e="maybe", key=None, err=code_of(exc), t=time.time())
            return
        self.log.write(e="ack", key=None, id=task["id"], s=status, t=time.time())

    def batch(self) -> None:
        keys = [self.key() for _ in range(20)]
        for key in keys:
            self.log.write(e="intent", key=key, t=time.time())
        entries = [{"item": self.item(), "idempotencyKey": key} for key in keys]
        try:
            status, _, answer = self.retrying(
                "batch", self.client.request, "POST", TASKS_PATH + "/batch", body={"tasks": entries}
            )
        except Errors as exc:
            for key in keys:
                self.log.write(e="gaveup", key=key, err=code_of(exc), t=time.time())
            return
        for key, task in zip(keys, answer["tasks"], strict=True):
            self.log.write(e="ack", key=key, id=task["id"], s=status, t=time.time())


class Claimer(Loop):
    """Claim with a wait; heartbeat or report progress; finish, fail, fail with a retry, or
    abandon the lease on purpose (the sweep must take it back). While draining: finish only."""

    def __init__(self, name: str, ctx: Context, seed: int) -> None:
        super().__init__(name, ctx, seed, ctx.tokens["wendy"])

    def body(self) -> None:
        while not self.ctx.over():
            try:
                task = self.call(
                    "claim", self.client.claim, HOST, QUEUE, self.name, wait=1, lease=self.ctx.lease
                )
            except Errors:
                time.sleep(0.2)
                continue
            if isinstance(task, dict):
                self.work(task)

    def work(self, task: dict[str, Any]) -> None:
        tid, attempt = task["id"], int(task["attempts"])
        item = task.get("item") or {}
        self.log.write(e="claim", id=tid, a=attempt, w=self.name, t=time.time())
        first = attempt == 1 and not self.ctx.draining.is_set()
        draw = self.rng.random()
        if first and draw < 0.04:
            self.log.write(e="end", id=tid, a=attempt, how="abandon", s="-", t=time.time())
            return
        time.sleep(float(item.get("work_ms", 0)) / 1000 if isinstance(item, dict) else 0)
        if self.rng.random() < 0.3:
            beat = {} if self.rng.random() < 0.5 else {"progress": {"half": True}}
            # a lost lease shows in the result's answer
            with contextlib.suppress(*Errors):
                self.call(
                    "progress",
                    self.client.progress,
                    HOST,
                    QUEUE,
                    tid,
                    self.name,
                    attempt,
                    beat.get("progress"),
                )
        if draw < 0.10:
            how, report = "fail", {"error": "soak: failed on purpose"}
        elif first and draw < 0.14:
            how, report = "retry", {"error": "soak: try again"}
        else:
            how, report = "result", {"by": self.name, "attempt": attempt}
        try:
            if how == "result":
                self.retrying(
                    "result", self.client.result, HOST, QUEUE, tid, self.name, attempt, report
                )
            else:
                self.retrying(
                    "fail",
                    self.client.fail,
                    HOST,
                    QUEUE,
                    tid,
                    self.name,
                    attempt,
                    report,
                    retry=how == "retry",
                )
            status = "ok"
        except Errors as exc:
            status = code_of(exc)
        self.log.write(e="end", id=tid, a=attempt, how=how, s=status, t=time.time())


class StreamReader(Loop):
    """Follow the queue's events as its operator; every `data:` line must parse as an event."""

    def __init__(self, name: str, ctx: Context, seed: int) -> None:
        super().__init__(name, ctx, seed, ctx.tokens["olga"])
        self.events = self.bad = self.reconnects = 0
        self.last_id = ""

    def body(self) -> None:
        while not self.ctx.over():
            with contextlib.suppress(OSError, http.client.HTTPException):
                self.follow()
            self.reconnects += 1
            time.sleep(0.5)
        self.log.write(
            e="sse", events=self.events, bad=self.bad, reconnects=self.reconnects, t=time.time()
        )

    def follow(self) -> None:
        host, port = self.ctx.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        headers = {
            "Authorization": f"Bearer {self.ctx.tokens['olga']}",
            "Accept": "text/event-stream",
        }
        if self.last_id:
            headers["Last-Event-ID"] = self.last_id
        try:
            self.requests += 1
            conn.request("GET", f"/api/v1/queues/{HOST}/{QUEUE}/events", headers=headers)
            response = conn.getresponse()
            if response.status >= 500:
                body = response.read(2000)
                self.log.write(e="http", s=response.status, code=_code(body), op="events")
                return
            if response.status != 200:
                response.read(2000)
                time.sleep(1)
                return
            while not self.ctx.over():
                raw = response.readline()  # chunked transfer decoded
                if not raw:
                    return
                self.line(raw.rstrip(b"\r\n"))
        finally:
            conn.close()

    def line(self, raw: bytes) -> None:
        if raw.startswith(b"id:"):
            self.last_id = raw[3:].strip().decode(errors="replace")
        elif raw.startswith(b"data:"):
            try:
                event = json.loads(raw[5:])
                if not isinstance(event, dict) or "event" not in event:
                    raise ValueError("not an event")
                self.events += 1
            except ValueError:
                self.bad += 1
                self.log.write(e="sse_bad", raw=raw[:300].decode(errors="replace"), t=time.time())


def _code(body: bytes) -> str:
    try:
        return str(json.loads(body).get("code", "?"))
    except (ValueError, AttributeError):
        return "not-json"


class SlowReceiver(threading.Thread):
    """The failure webhook's receiver on 127.0.0.1: it reads the call, then answers one byte
    every `byte_seconds`, so a sender without its own deadline would hang on it."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"

    def __init__(self, stop: threading.Event, byte_seconds: float = 2.0) -> None:
        super().__init__(name="slow-receiver", daemon=True)
        self.stop, self.byte_seconds = stop, byte_seconds
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.5)
        self.port = int(self.sock.getsockname()[1])
        self.calls = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.lock:
                self.calls += 1
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()
        self.sock.close()

    def answer(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            conn.recv(65536)
            for i in range(len(self.ANSWER)):
                if self.stop.wait(self.byte_seconds):
                    return
                conn.sendall(self.ANSWER[i : i + 1])
        except OSError:
            pass
        finally:
            conn.close()
