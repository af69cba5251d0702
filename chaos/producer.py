"""One chaos producer process: post its share of the tasks, each with an Idempotency-Key,
retrying (same key) on connection errors and 5xx until acknowledged or out of time.

The log has an `intent` line before a key's first try and an `ack` line with the task id after
its answer: a task that exists without an ack is explained by an intent whose answer was lost.
To keep the nemesis meeting posts all along the run (not only in its first seconds), a producer
holds back while more than `--backlog` tasks are pending, read straight from the store (the
queue's pending directory, or with `--pending-dsn` the PostgreSQL store's table).
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import time

import psycopg

from taskhoster.client import ApiError, Client

from .server import HOST, QUEUE
from .worker import Log, outcome

TASKS_PATH = f"/queues/{HOST}/{QUEUE}/tasks"
KEY_DEADLINE_SECONDS = 120.0  # one key's retries stop after this (a server down for 2 min)


PENDING_SQL = "SELECT count(*) FROM th_tasks WHERE host = %s AND queue = %s AND status = 'pending'"


def pending_count(pending_dir: str, pending_dsn: str = "") -> int:
    if pending_dsn:
        try:
            with psycopg.connect(pending_dsn, connect_timeout=2) as conn:
                row = conn.execute(PENDING_SQL, (HOST, QUEUE)).fetchone()
        except psycopg.Error:
            return 0  # the database is down: the posts will find out and retry
        return int(row[0]) if row else 0
    try:
        return sum(1 for e in os.scandir(pending_dir) if e.name.endswith(".json"))
    except FileNotFoundError:
        return 0


def run(
    url: str,
    token: str,
    name: str,
    log_path: str,
    first: int,
    count: int,
    run_id: str,
    seed: int,
    pending_dir: str,
    backlog: int,
    pending_dsn: str = "",
) -> None:
    rng = random.Random(seed)  # noqa: S311 (seeded, to replay a run; not security)
    client = Client(url, token=token, timeout=10)
    log = Log(log_path)
    for n in range(first, first + count):
        if n % 25 == 0:
            for _ in range(600):  # at most 60 s held back: the run's own deadline is the judge
                if pending_count(pending_dir, pending_dsn) <= backlog:
                    break
                time.sleep(0.1)
        key = f"{run_id}-{n}"
        item = {"n": n, "key": key, "work_ms": rng.randint(0, 50), "progress": rng.random() < 0.3}
        log.write(e="intent", p=name, key=key, n=n, t=time.time())
        deadline, tries = time.monotonic() + KEY_DEADLINE_SECONDS, 0
        while True:
            tries += 1
            try:
                # client.post would retry a keyed post by itself; asking the wire directly
                # (idempotent=False: no inner retry) lets this loop count every retry it makes.
                status, _, task = client.request(
                    "POST", TASKS_PATH, body=item, headers={"Idempotency-Key": key}
                )
                # s=200: an idempotent replay, so an earlier try had landed and lost its answer
                log.write(
                    e="ack", p=name, key=key, id=task["id"], s=status, tries=tries, t=time.time()
                )
                break
            except (ApiError, OSError, http.client.HTTPException) as exc:
                retry = not isinstance(exc, ApiError) or exc.status >= 500
                log.write(e="post_error", p=name, key=key, err=outcome(exc), tries=tries)
                if not retry or time.monotonic() > deadline:
                    log.write(e="gaveup", p=name, key=key, err=outcome(exc), tries=tries)
                    break
                time.sleep(min(1.0, 0.05 * 2 ** min(tries, 5)) * rng.uniform(0.5, 1.5))
    log.write(e="done", p=name, t=time.time())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    for arg in ("--url", "--token", "--name", "--log", "--run-id", "--pending-dir"):
        p.add_argument(arg, required=True)
    for arg in ("--first", "--count", "--seed", "--backlog"):
        p.add_argument(arg, type=int, required=True)
    p.add_argument("--pending-dsn", default="", help="count the pending tasks in PostgreSQL")
    a = p.parse_args()
    run(
        a.url,
        a.token,
        a.name,
        a.log,
        a.first,
        a.count,
        a.run_id,
        a.seed,
        a.pending_dir,
        a.backlog,
        a.pending_dsn,
    )


if __name__ == "__main__":
    main()
