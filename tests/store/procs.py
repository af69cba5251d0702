"""Code that runs in child processes (importable by spawn): claimers, log writers, crashers."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queues.store import EventLog, QueueSettings, QueueStore, StoreConfig, Task, files
from queues.store_pg import PgStoreConfig, PostgresStore

HOST, QUEUE = "task.example.com", "resize"
LONG = QueueSettings(queue_seconds=10 * 86400, lease_seconds=3600, retain_seconds=10 * 86400)
CAP = 20  # capped_poster's maxPending


@dataclass(frozen=True)
class StoreOpener:
    """How a child process opens the test's store: its directories, or (pg set) its
    PostgreSQL config. Picklable, for spawn."""

    items: str = ""
    logs: str = ""
    fsync: bool = False
    pg: PgStoreConfig | None = None

    def open(self) -> Any:
        if self.pg is not None:
            return PostgresStore(self.pg)
        config = StoreConfig(items_dir=Path(self.items), logs_dir=Path(self.logs), fsync=self.fsync)
        return QueueStore(config)


def claimer(items: str, logs: str, worker: str, out: Any, ready: Any, start: Any) -> None:
    """Once every claimer is ready, claim until the queue is empty; report every claimed id and
    any error."""
    store = QueueStore(StoreConfig(items_dir=Path(items), logs_dir=Path(logs), fsync=False))
    ready.put(worker)
    start.wait()
    got, errors, misses = [], [], 0
    while misses < 3:
        try:
            tasks = store.claim(HOST, QUEUE, settings=LONG, worker=worker, max_tasks=1)
        except Exception as exc:  # any error at all fails the test
            errors.append(repr(exc))
            break
        if tasks:
            got.append(tasks[0].id)
            misses = 0
        else:
            misses += 1
    out.put((worker, got, errors))


def log_writer(logs: str, writer: int, lines: int, start: Any) -> None:
    log = EventLog(Path(logs), fsync=False)
    task = Task.from_record(
        {
            "id": f"{writer:016x}",
            "host": HOST,
            "queue": QUEUE,
            "status": "pending",
            "item": {"pad": "x" * (50 + writer * 37)},
            "postedBy": None,
            "postedAt": 0,
            "updatedAt": 0,
            "attempts": 0,
            "lease": None,
            "progress": None,
            "result": None,
            "error": None,
            "finishedAt": None,
            "fetchedAt": None,
        }
    )
    start.wait()
    now = int(time.time() * 1000)
    for n in range(lines):
        log.append(task, "posted", now=now, worker=f"w{writer}-{n}")


def crash_at(config: StoreConfig, op: str, task_id: str | None, k: int) -> None:
    """Run one operation and die at its k-th disk-changing call (exit 0 if it had fewer)."""
    import os

    store = QueueStore(config)
    files.FAULTS.reset()
    files.FAULTS.exit_at = k
    run_op(store, op, task_id)
    os._exit(0)


def run_op(store: QueueStore, op: str, task_id: str | None) -> Any:
    from queues.store import sweep_queue

    now = int(time.time() * 1000)
    w: dict[str, Any] = {"settings": LONG, "worker": "box-1", "attempt": 1}
    if op == "post":
        return store.post(HOST, QUEUE, {"n": 1}, settings=LONG, posted_by="a", idempotency_key=None)
    if op == "post_keyed":
        return store.post(HOST, QUEUE, {"n": 1}, settings=LONG, posted_by="a", idempotency_key="k")
    assert task_id is not None
    if op == "claim":
        return store.claim(HOST, QUEUE, settings=LONG, worker="box-1")
    if op == "progress":
        return store.progress(HOST, QUEUE, task_id, progress={"p": 1}, **w)
    if op == "finish":
        return store.finish(HOST, QUEUE, task_id, result={"r": 1}, **w)
    if op == "fail":
        return store.fail(HOST, QUEUE, task_id, result={"e": 1}, **w)
    if op == "requeue":
        return store.fail(HOST, QUEUE, task_id, result={"e": 1}, retry=True, **w)
    if op in ("cancel", "cancel_running"):
        return store.cancel(HOST, QUEUE, task_id, settings=LONG)
    if op == "retry":
        return store.retry(HOST, QUEUE, task_id, settings=LONG)
    if op == "fetch":
        return store.fetch(HOST, QUEUE, task_id)
    if op == "sweep_lapse":
        return sweep_queue(store, HOST, QUEUE, LONG, now=now + 3601 * 1000)
    if op == "sweep_timeout":
        return sweep_queue(store, HOST, QUEUE, LONG, now=now + 10 * 86400 * 1000 + 1)
    if op == "sweep_clean":
        return sweep_queue(store, HOST, QUEUE, LONG, now=now + 10 * 86400 * 1000 + 1)
    raise ValueError(op)


def listing_partner(items: str, logs: str, commands: Any, replies: Any) -> None:
    """Post, claim and finish on command, answering each step once it is done, so the parent
    can list between the steps."""
    store = QueueStore(StoreConfig(items_dir=Path(items), logs_dir=Path(logs), fsync=False))
    claimed: list[Task] = []
    posted = 0
    while (step := commands.get()) is not None:
        op, n = step
        for _ in range(n):
            if op == "post":
                owner = ["alice", "bob", None][posted % 3]
                store.post(HOST, QUEUE, {"n": posted}, settings=LONG, posted_by=owner)
                posted += 1
            elif op == "claim":
                claimed += store.claim(HOST, QUEUE, settings=LONG, worker="partner")
            elif op == "finish" and claimed:
                task = claimed.pop(0)
                store.finish(HOST, QUEUE, task.id, settings=LONG, worker="partner",
                             attempt=task.attempts, result={"ok": 1})  # fmt: skip
        replies.put(step)
    store.close()


def capped_poster(opener: StoreOpener, queues: list[str], barrier: Any, out: Any) -> None:
    """Post once into each queue in turn, all posters released together by the barrier;
    report per queue whether the post was taken or refused as full."""
    from queues.store import QueueFull

    # (the file store's with fsync on, as in production: the write between the count and the
    # task's arrival takes as long as a real one does)
    store = opener.open()
    capped = QueueSettings(max_pending=CAP)
    outcomes = []
    for queue in queues:
        store.stats(HOST, queue)  # the index is warm: the race is the count, not a first listing
        barrier.wait()
        try:
            store.post(HOST, queue, {"q": queue}, settings=capped, posted_by="a")
            outcomes.append((queue, "posted"))
        except QueueFull:
            outcomes.append((queue, "full"))
        except Exception as exc:  # any other error fails the test
            outcomes.append((queue, repr(exc)))
    out.put(outcomes)


def batch_poster(items: str, logs: str, ack_fd: int, size: int, flush: str = "fsync") -> None:
    """Post batches until killed; after each batch's answer, write its ids to `ack_fd` as one
    JSON line (a pipe: one write below PIPE_BUF arrives whole or not at all)."""
    import os

    import orjson

    from queues.store import PostEntry

    config = StoreConfig(items_dir=Path(items), logs_dir=Path(logs), fsync=True, flush=flush)
    store = QueueStore(config)
    n = 0
    while True:
        entries = [
            PostEntry(item={"n": n + i}, idempotency_key=f"k{n + i}" if i % 4 == 0 else None)
            for i in range(size)
        ]
        posted = store.post_many(HOST, QUEUE, entries, settings=LONG, posted_by="a")
        os.write(ack_fd, orjson.dumps([[p.task.id, p.task.item["n"]] for p in posted]) + b"\n")
        n += size


def batch_finisher(items: str, logs: str, ack_fd: int, size: int, flush: str = "fsync") -> None:
    """Claim and batch-finish until the queue is empty or killed; after each batch's answer,
    write [id, status] of each entry to `ack_fd` as one JSON line (and "claimed" before each
    batch finish starts, so the parent can aim its kill at the finish). One in three is
    retried."""
    import os

    import orjson

    from queues.store import Report, Reported

    config = StoreConfig(items_dir=Path(items), logs_dir=Path(logs), fsync=True, flush=flush)
    store = QueueStore(config)
    while tasks := store.claim(HOST, QUEUE, settings=LONG, worker="box-1", max_tasks=size):
        os.write(ack_fd, b'"claimed"\n')  # the batch finish starts now
        reports = [
            Report(
                task_id=t.id,
                attempt=t.attempts,
                outcome="retry" if i % 3 == 0 else "result",
                result={"i": i},
            )
            for i, t in enumerate(tasks)
        ]
        answers = store.finish_many(HOST, QUEUE, reports, settings=LONG, worker="box-1")
        acked = [[a.task.id, a.task.status.value] for a in answers if isinstance(a, Reported)]
        os.write(ack_fd, orjson.dumps(acked) + b"\n")
    os._exit(0)


def pg_claimer(opener: StoreOpener, worker: str, out: Any, ready: Any, start: Any) -> None:
    """Claim batches of 1 to 5 until the queue is empty; report every claimed id and any error
    (the PostgreSQL store's claim race: SKIP LOCKED must hand each task to one claimer)."""
    store = opener.open()
    ready.put(worker)
    start.wait()
    got: list[str] = []
    errors: list[str] = []
    misses, size = 0, 1
    while misses < 3:
        try:
            tasks = store.claim(HOST, QUEUE, settings=LONG, worker=worker, max_tasks=size)
        except Exception as exc:  # any error at all fails the test
            errors.append(repr(exc))
            break
        got += [task.id for task in tasks]
        misses = 0 if tasks else misses + 1
        size = size % 5 + 1
    store.close()
    out.put((worker, got, errors))


def pg_endless_claimer(opener: StoreOpener, claimed: Any) -> None:
    """Claim with one-second leases and never report, telling each claimed id, until killed."""
    store = opener.open()
    short = QueueSettings(queue_seconds=3600, lease_seconds=1)
    while True:
        for task in store.claim(HOST, QUEUE, settings=short, worker="doomed", max_tasks=3):
            claimed.put(task.id)


def poster(opener: StoreOpener, items: list[dict[str, Any]], now: int, out: Any) -> None:
    """Post the items one at a time, all at the same millisecond; report their ids."""
    store = opener.open()
    ids = [
        store.post(HOST, QUEUE, item, settings=LONG, posted_by="alice", now=now).task.id
        for item in items
    ]
    store.close()
    out.put(ids)


def chain_worker(
    opener: StoreOpener, worker: str, fail_id: str | None, out: Any, start: Any = None
) -> None:
    """Claim and finish (or, for `fail_id`, fail) tasks of the queue until none is pending or
    processing any more (a worker that gave up after a quiet spell left a chain unfinished on
    a loaded machine); report the ids in the order this worker finished them, with the time
    each was claimed and finished (the order a chain must keep).

    An idle worker waits in the store's waiting claim, which a task's release wakes (on files
    its record arriving in pending/, on PostgreSQL its `released` notification), rather than
    sleeping between claims: a sleep on a loaded machine oversleeps, and every link of the
    chain paid it. With `start` (a barrier of the workers), none claims before all are ready:
    on a loaded machine the first one started could run a whole chain while the others were
    still importing."""
    store = opener.open()
    done: list[tuple[str, int, int]] = []
    errors: list[str] = []
    if start is not None:
        start.wait(120)
    deadline = time.monotonic() + 200  # a test must fail, not hang
    try:
        while True:
            tasks = store.wait_claim(HOST, QUEUE, settings=LONG, worker=worker, wait_seconds=0.5)
            if not tasks:
                counts = store.state_counts(HOST, QUEUE)
                if counts.pending == 0 and counts.processing == 0:
                    break
                if time.monotonic() > deadline:
                    errors.append(f"still {counts.pending} pending, {counts.processing} running")
                    break
                continue
            task = tasks[0]
            claimed = time.monotonic_ns()
            w = {"settings": LONG, "worker": worker, "attempt": task.attempts}
            if task.id == fail_id:
                store.fail(HOST, QUEUE, task.id, result={"broke": True}, **w)
            else:
                store.finish(HOST, QUEUE, task.id, result={"by": worker}, **w)
            done.append((task.id, claimed, time.monotonic_ns()))
    except Exception as exc:  # any error at all fails the test
        errors.append(repr(exc))
    out.put((worker, done, errors))


def finish_and_crash(config: StoreConfig, task_id: str, k: int) -> None:
    """Finish a claimed task and die at the k-th disk-changing call (exit 0 if it had fewer):
    the crash may fall between the task's ending and its waiters' release."""
    import os

    store = QueueStore(config)
    files.FAULTS.reset()
    files.FAULTS.exit_at = k
    store.finish(HOST, QUEUE, task_id, settings=LONG, worker="box-1", attempt=1, result={"r": 1})
    os._exit(0)


def after_poster(opener: StoreOpener, dep_id: str, n: int, start: Any, out: Any) -> None:
    """Post `n` tasks that wait for `dep_id`, as soon as `start` is set; report their ids."""
    store = opener.open()
    start.wait()
    ids, errors = [], []
    try:
        for i in range(n):
            ids.append(
                store.post(
                    HOST, QUEUE, {"i": i}, settings=LONG, posted_by="a", after=[dep_id]
                ).task.id
            )
    except Exception as exc:  # any error at all fails the test
        errors.append(repr(exc))
    out.put((ids, errors))


def limited_worker(opener: StoreOpener, settings: QueueSettings, worker: str, start: Any,
                   out: Any) -> None:  # fmt: skip
    """Claim from a limited queue until it stays empty: each task held a moment, then marked
    by a progress line (still processing) and finished; report how many and any error. The
    event log's (claimed, progress) spans lie inside each task's time in processing."""
    store = opener.open()
    start.wait()
    done, errors, misses = 0, [], 0
    while misses < 20:
        try:
            tasks = store.wait_claim(HOST, QUEUE, settings=settings, worker=worker,
                                     wait_seconds=0.2)  # fmt: skip
            for task in tasks:
                time.sleep(0.005)
                store.progress(HOST, QUEUE, task.id, settings=settings, worker=worker,
                               attempt=task.attempts, progress={"ending": True})  # fmt: skip
                store.finish(HOST, QUEUE, task.id, settings=settings, worker=worker,
                             attempt=task.attempts, result={"ok": 1})  # fmt: skip
                done += 1
        except Exception as exc:  # any error at all fails the test
            errors.append(repr(exc))
            break
        misses = 0 if tasks else misses + 1
    store.close()
    out.put((worker, done, errors))


def crash_in_limited_claim(config: StoreConfig, settings: QueueSettings, now: int, k: int) -> None:
    """Claim up to two from a limited queue, dying at the claim's k-th disk-changing call
    (exit 0 if it made fewer)."""
    import os

    store = QueueStore(config)
    files.FAULTS.reset()
    files.FAULTS.exit_at = k
    store.claim(HOST, QUEUE, settings=settings, worker="doomed", max_tasks=2, now=now)
    os._exit(0)


def rated_claimer(opener: StoreOpener, settings: QueueSettings, seconds: float, start: Any,
                  out: Any, max_tasks: int = 1) -> None:  # fmt: skip
    """Claim up to `max_tasks` at a time, as fast as the rate limit lets, for `seconds`;
    report how many."""
    store = opener.open()
    start.wait()
    deadline, got, errors = time.monotonic() + seconds, 0, []
    while time.monotonic() < deadline:
        try:
            got += len(store.wait_claim(HOST, QUEUE, settings=settings, worker="rated",
                                        wait_seconds=0.5, max_tasks=max_tasks))  # fmt: skip
        except Exception as exc:  # any error at all fails the test
            errors.append(repr(exc))
            break
    store.close()
    out.put((got, errors))


def limited_endless_claimer(opener: StoreOpener, settings: QueueSettings, claimed: Any) -> None:
    """Claim from a limited queue, telling each claimed id, until killed."""
    store = opener.open()
    while True:
        for task in store.wait_claim(HOST, QUEUE, settings=settings, worker="doomed",
                                     wait_seconds=1, max_tasks=2):  # fmt: skip
            claimed.put(task.id)


def flow_hand(opener: StoreOpener, settings: QueueSettings, orders: Any, answers: Any) -> None:
    """Claim or finish as told, one order at a time, with one store kept open (its process's
    view of the queue's flow carried from order to order): ("claim", max_tasks) answers the
    claimed ids, ("finish", [(id, attempt), ...]) answers []; None ends it."""
    store = opener.open()
    while (order := orders.get()) is not None:
        verb, arg = order
        try:
            if verb == "claim":
                tasks = store.claim(HOST, QUEUE, settings=settings, worker="hand", max_tasks=arg)
                answers.put([t.id for t in tasks])
            else:
                for task_id, attempt in arg:
                    store.finish(HOST, QUEUE, task_id, settings=settings, worker="hand",
                                 attempt=attempt, result={"ok": 1})  # fmt: skip
                answers.put([])
        except Exception as exc:  # any error at all fails the test
            answers.put(repr(exc))
    store.close()


def _kill_before_call(k: int) -> None:
    """SIGKILL this process just before its k-th disk-changing call from now on."""
    import os
    import signal

    def kill_at(n: int, kind: str) -> None:
        if n == k:
            os.kill(os.getpid(), signal.SIGKILL)

    files.FAULTS.reset()
    files.FAULTS.before = kill_at


def finish_and_kill(config: StoreConfig, task_id: str, k: int) -> None:
    """Finish a claimed task and SIGKILL this process just before its k-th disk-changing call
    (exit 0 if it had fewer): the kill may fall between the ending, the group's count and the
    group's callback."""
    import os

    store = QueueStore(config)
    _kill_before_call(k)
    store.finish(HOST, QUEUE, task_id, settings=LONG, worker="box-1", attempt=1, result={"r": 1})
    os._exit(0)


def sweep_and_kill(config: StoreConfig, now: int, k: int) -> None:
    """Sweep the test's queue and SIGKILL this process just before its k-th disk-changing call
    (exit 0 if it had fewer): the kill may fall in a group's removal."""
    import os

    store = QueueStore(config)
    _kill_before_call(k)
    store.sweep_queue(HOST, QUEUE, LONG, now=now)
    os._exit(0)


def sweeper(opener: StoreOpener, now: int, start: Any, out: Any) -> None:
    """Sweep the test's queue once, as soon as `start` is set (two of them race)."""
    store = opener.open()
    start.wait()
    try:
        store.sweep_queue(HOST, QUEUE, LONG, now=now)
        out.put(None)
    except Exception as exc:  # any error at all fails the test
        out.put(repr(exc))


def finisher(opener: StoreOpener, task_id: str, start: Any, out: Any) -> None:
    """Finish one task box-1 holds, as soon as `start` is set (several of them race)."""
    store = opener.open()
    start.wait()
    try:
        store.finish(HOST, QUEUE, task_id, settings=LONG, worker="box-1", attempt=1, result={})
        out.put(None)
    except Exception as exc:  # any error at all fails the test
        out.put(repr(exc))


def close_group_and_kill(config: StoreConfig, k: int) -> None:
    """Post the task that closes group g1 of the test's queue and SIGKILL this process just
    before its k-th disk-changing call (exit 0 if it had fewer)."""
    import os

    from queues.store.batch import OnComplete

    store = QueueStore(config)
    _kill_before_call(k)
    closing = OnComplete(queue="reports", item={"report": 1}, settings=LONG)
    store.post(HOST, QUEUE, {"closing": 1}, settings=LONG, posted_by="alice", group="g1",
               on_complete=closing)  # fmt: skip
    os._exit(0)


def fail_and_wait(opener: StoreOpener, task_id: str, answered: Any) -> None:
    """Fail a claimed task, say it was answered, and wait to be killed (the releases its
    ending handed to the process's background may still be running)."""
    store = opener.open()
    store.fail(HOST, QUEUE, task_id, settings=LONG, worker="box-1", attempt=1, result={"no": 1})
    answered.set()
    time.sleep(600)
