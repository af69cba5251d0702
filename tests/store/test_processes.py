"""Real processes: the claim race, the event log under four writers, and a day rollover."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
from collections import Counter

import orjson
import pytest

from queues.store import EventLog, QueueSettings

from . import procs
from .conftest import HOST, QUEUE, T0


@pytest.mark.slow
def test_claim_race_every_task_claimed_exactly_once(h):
    posted = {h.post(settings=procs.LONG).id for _ in range(1000)}
    ctx = mp.get_context("spawn")
    out, ready, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [
        ctx.Process(
            target=procs.claimer,
            args=(str(h.config.items_dir), str(h.config.logs_dir), f"w{i}", out, ready, start),
        )
        for i in range(8)
    ]
    for p in workers:
        p.start()
    # All eight started and opened the store before any claims: on a loaded machine a process
    # still starting would otherwise find the queue emptied by the first one.
    for _ in workers:
        ready.get(timeout=120)
    start.set()
    results = [out.get(timeout=120) for _ in workers]
    for p in workers:
        p.join(30)
        assert p.exitcode == 0
    claimed = Counter(i for _, got, _ in results for i in got)
    assert [e for _, _, errors in results for e in errors] == []
    assert set(claimed) == posted
    assert max(claimed.values()) == 1
    assert sum(1 for _, got, _ in results if got) >= 2  # they really raced
    assert len(list((h.queue_dir / "pending").iterdir())) == 0
    assert len(list((h.queue_dir / "processing").glob("*.json"))) == 1000
    assert Counter(e["event"] for e in h.events()) == {"posted": 1000, "claimed": 1000}


@pytest.mark.slow
def test_event_log_four_writers_never_interleave(tmp_path):
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    writers = [
        ctx.Process(target=procs.log_writer, args=(str(tmp_path), i, 10_000, start))
        for i in range(4)
    ]
    for p in writers:
        p.start()
    start.set()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    seen: Counter[str] = Counter()
    for day in (tmp_path / "tasks").glob("*.jsonl"):
        for raw in day.read_bytes().split(b"\n")[:-1]:
            if not raw:
                continue  # a writer that saw another's append half done starts on a new line
            line = orjson.loads(raw)  # a broken or interleaved line would not parse
            writer = int(line["id"], 16)
            assert line["bytes"]["item"] == len(orjson.dumps({"pad": "x" * (50 + writer * 37)}))
            assert line["worker"].startswith(f"w{writer}-")
            seen[line["id"]] += 1
    assert sorted(seen.values()) == [10_000] * 4


def test_day_rollover_puts_each_line_in_its_own_day(h):
    task = h.post()
    log = EventLog(h.config.logs_dir, fsync=True)
    midnight = int(dt.datetime(2026, 7, 27, tzinfo=dt.UTC).timestamp() * 1000)
    log.append(task, "claimed", now=midnight - 1)
    log.append(task, "result", now=midnight)
    before = orjson.loads((h.config.logs_dir / "tasks" / "2026-07-26.jsonl").read_bytes())
    after = orjson.loads((h.config.logs_dir / "tasks" / "2026-07-27.jsonl").read_bytes())
    assert before["at"] == "2026-07-26T23:59:59.999Z" and before["event"] == "claimed"
    assert after["at"] == "2026-07-27T00:00:00.000Z" and after["t"] == midnight // 1000
    # the post's own day (2025) and 07-26 are older than two days before 07-29; 07-27 is not
    assert log.prune(now=midnight + 2 * 86_400_000, retain_days=2) == 2
    assert not (h.config.logs_dir / "tasks" / "2026-07-26.jsonl").exists()
    assert (h.config.logs_dir / "tasks" / "2026-07-27.jsonl").exists()
    log.close()


def test_wait_claim_wakes_on_a_post_from_another_process(h):
    import threading
    import time

    settings = QueueSettings()
    h.store.create_queue(HOST, QUEUE)
    poster = mp.get_context("spawn").Process(
        target=_post_later, args=(str(h.config.items_dir), str(h.config.logs_dir))
    )
    started = time.monotonic()
    poster.start()
    got = h.store.wait_claim(HOST, QUEUE, settings=settings, worker="w", wait_seconds=20)
    waited = time.monotonic() - started
    poster.join(20)
    assert len(got) == 1 and waited < 15
    # and a waiter on a task wakes when another thread finishes it
    task = got[0]
    threading.Timer(
        0.2,
        lambda: h.store.finish(
            HOST, QUEUE, task.id, settings=settings, worker="w", attempt=1, result={}
        ),
    ).start()
    changed = h.store.wait_for_change(HOST, QUEUE, task.id, since=task.updated_at, wait_seconds=10)
    assert changed.status.value == "finished"
    assert h.store.wait_claim(HOST, QUEUE, settings=settings, worker="w", wait_seconds=0.1) == []


def _post_later(items: str, logs: str) -> None:
    import time
    from pathlib import Path

    from queues.store import QueueStore, StoreConfig

    store = QueueStore(StoreConfig(items_dir=Path(items), logs_dir=Path(logs), fsync=False))
    time.sleep(1.0)  # the waiter is blocked by now
    store.post(HOST, QUEUE, {"late": True}, settings=QueueSettings(), posted_by=None, now=T0)
