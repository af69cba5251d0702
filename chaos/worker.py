"""One chaos worker process: claim, work 0-50 ms, maybe report progress, report the result.

Not `taskhoster.worker.run_worker`: its heartbeat would notice a lost lease after a pause and
drop the result, and this run must send the late result to see it refused with 409. The work
is shorter than the lease, so no heartbeat is needed.

Every line of the log is one `write` on an O_APPEND file, so a SIGKILL loses at most the line
being written. The flag file says, at any instant, whether the process holds a claimed task
(b"1" + id) or not (b"0"): the nemesis reads it while the process is stopped, to pause a worker
that holds a task, which is the case the 409 is about.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import time
from typing import Any

from taskhoster.client import ApiError, Client

from .server import HOST, QUEUE

# a result that broke off may be sent again: a landed one answers 200 again (a replay), as
# long as no other attempt has begun since
RESULT_TRIES = 3


class Log:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **line: Any) -> None:
        os.write(self.fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())


def outcome(exc: BaseException) -> str:
    return exc.code if isinstance(exc, ApiError) else f"conn:{type(exc).__name__}"


def run(url: str, token: str, name: str, log_path: str, flag_path: str, lease: int) -> None:
    stop = False

    def on_term(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    client = Client(url, token=token, timeout=10)
    log = Log(log_path)
    flag = os.open(flag_path, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(flag, b"0" + b" " * 16, 0)
    log.write(e="start", w=name, t=time.time())
    while not stop:
        try:
            task = client.claim(HOST, QUEUE, name, wait=1, lease=lease)
        except (ApiError, OSError, http.client.HTTPException) as exc:
            log.write(e="claim_error", w=name, err=outcome(exc), t=time.time())
            time.sleep(0.2)
            continue
        if not isinstance(task, dict):
            continue
        held = time.monotonic()
        tid, attempt, item = task["id"], int(task["attempts"]), task.get("item") or {}
        # the claim's line first: a worker stopped as soon as its flag says "holding" has
        # already logged the claim the checker will look for
        log.write(e="claim", w=name, id=tid, a=attempt, t=time.time())
        os.pwrite(flag, b"1" + tid.encode(), 0)
        work = float(item.get("work_ms", 0)) / 1000
        if item.get("progress"):
            time.sleep(work / 2)
            try:
                client.progress(HOST, QUEUE, tid, name, attempt, {"half": True})
                log.write(e="progress", w=name, id=tid, a=attempt, s="ok")
            except (ApiError, OSError, http.client.HTTPException) as exc:
                log.write(e="progress", w=name, id=tid, a=attempt, s=outcome(exc))
            time.sleep(work / 2)
        else:
            time.sleep(work)
        body = {"by": name, "attempt": attempt}
        for tries in range(1, RESULT_TRIES + 1):
            again = False
            try:
                client.result(HOST, QUEUE, tid, name, attempt, body)
                status = "ok"
            except (ApiError, OSError, http.client.HTTPException) as exc:
                status = outcome(exc)
                again = not isinstance(exc, ApiError) or exc.status >= 500
            # late: the lease had lapsed by the time the answer came (a pause may fall anywhere
            # between the claim and the answer, so it is measured after the call)
            late = time.monotonic() - held > lease
            log.write(
                e="result",
                w=name,
                id=tid,
                a=attempt,
                s=status,
                late=late,
                tries=tries,
                held=round(time.monotonic() - held, 3),
                t=time.time(),
            )
            if not again:
                break
            time.sleep(0.1 * tries)
        os.pwrite(flag, b"0" + b" " * 16, 0)
    log.write(e="stop", w=name, t=time.time())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    for arg in ("--url", "--token", "--name", "--log", "--flag"):
        p.add_argument(arg, required=True)
    p.add_argument("--lease", type=int, default=2)
    a = p.parse_args()
    run(a.url, a.token, a.name, a.log, a.flag, a.lease)


if __name__ == "__main__":
    main()
