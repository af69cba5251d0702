"""Metrics benchmark: what one scrape of /metrics costs at 100 queues, one of them holding
100,000 tasks, over 1,000,000 ingested events (the last five minutes holding their share).

A scrape reads each queue's counts from its store (the file store's indexes: no task file is
read), the event totals past the settled row id (one GROUP BY over the rows ingested since
about a minute ago), the last five minutes' ends (one GROUP BY, then per measure the site's
newest 2,000 timed, and up to 100 of a queue those missed), the workers of the last 15 minutes
and the ingester's lag. The first scrape of a process counts every row once, and its first
minute recounts the newest 10,000 ids: both shown, not judged; the target is the steady
scrape's median.

A fresh SQLite database (or the empty PostgreSQL database --database-url names) and store in a
temporary directory, the production settings (DEBUG off), requests through Django's test
client in this process with the metrics token.

Run: .venv/bin/python bench/metrics_bench.py [--quick] [--tasks N] [--events N] [--queues N]
                                             [--repeats R] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from console_bench import fill_events, make_queues  # noqa: E402
from django_site import judge, set_up_site  # noqa: E402
from listing_bench import QUEUE, fill  # noqa: E402 (the 100,000-task queue, as it fills it)

TARGET_MS = 200.0
TOKEN = "bench-metrics-token"
PG_NAMES = """
UPDATE tasklogs_taskevent SET
  task_id = lpad(("offset" / 5)::text, 16, '0'),
  queue = CASE WHEN ("offset" / 5) %% 2 = 0 THEN %(queue)s
               ELSE 'q' || lpad((1 + ("offset" / 5) / 2 %% %(others)s)::text, 2, '0') END
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 tasks, 100,000 events")
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks in the big queue")
    parser.add_argument("--events", type=int, default=1_000_000, help="ingested events")
    parser.add_argument("--queues", type=int, default=100, help="configured queues")
    parser.add_argument("--last-day", type=float, default=0.25,
                        help="share of the events in the last 24 hours")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--database-url", default="",
                        help="an empty PostgreSQL database to use, not SQLite")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.events, args.repeats = 10_000, 100_000, 7
    return args


def setup_django(folder: Path, database_url: str) -> None:
    set_up_site(folder, database_url=database_url, env={"TASKHOSTER_METRICS_TOKEN": TOKEN})


def scrape(client) -> tuple[float, int, int]:
    """(ms, queries, bytes) of one scrape."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        took = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.content[:200]
    return took, len(queries), len(response.content)


def main() -> None:
    args = parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="metrics-bench-") as tmp:
        folder = Path(tmp)
        setup_django(folder, args.database_url)
        from django.core.cache import cache
        from django.test import Client

        from tasklogs.models import TaskEvent

        started = time.perf_counter()
        fill(folder, args.tasks)
        store_s = time.perf_counter() - started
        make_queues(args.queues)
        now_ms = time.time_ns() // 1_000_000
        events_s = fill_events(args.events, args.queues, args.last_day, now_ms)
        window = TaskEvent.objects.filter(t__gt=now_ms // 1000 - 300).count()
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                # console_bench's fill writes SQLite's substr(x, -16, 16); PostgreSQL reads a
                # negative start otherwise, and every row would land in one queue, one task.
                cursor.execute(PG_NAMES, {"queue": QUEUE, "others": max(args.queues - 1, 1)})
                cursor.execute("ANALYZE")  # as autovacuum would have by now on a real site
        print(f"{connection.vendor}: {args.tasks:,} tasks in the big queue ({store_s:.1f} s), "
              f"{args.queues} queues, "
              f"{args.events:,} events ({events_s:.1f} s to insert), {window:,} of them in "
              "the last 5 minutes")  # fmt: skip
        client = Client()
        cold_ms, cold_queries, size = scrape(client)
        first_minute = [scrape(client)[0] for _ in range(args.repeats)]
        # A minute on: the rows the first scrape left unsettled settle (sources.SETTLE_SECONDS).
        from queues.metrics import sources

        sources.event_totals(now_s=time.time() + sources.SETTLE_SECONDS + 1)
        samples, queries = [], 0
        for _ in range(args.repeats):
            # A scrape interval apart, as far as the caches go: what the store router and
            # the API keep of a queue's settings lasts TASKHOSTER_API_MEMO_SECONDS.
            time.sleep(2.5)
            took, queries, size = scrape(client)
            samples.append(took)
        cache.clear()
        recount_ms, _, _ = scrape(client)
        median = statistics.median(samples)
        print(f"\n{'scrape':<58} {'ms':>8} {'queries':>8}")
        print(f"{'first of the process (store indexes and totals built)':<58} "
              f"{cold_ms:>8.1f} {cold_queries:>8}")  # fmt: skip
        print(f"{'totals recounted (cache cleared: a restarted process)':<58} "
              f"{recount_ms:>8.1f} {'':>8}")  # fmt: skip
        print(f"{'first minute (the newest 10,000 ids recounted), median':<58} "
              f"{statistics.median(first_minute):>8.1f} {'':>8}")  # fmt: skip
        print(f"{'steady, median of ' + str(args.repeats):<58} {median:>8.1f} {queries:>8}")
        print(f"\n{size:,} bytes of exposition per scrape")
        judge("steady scrape median", median, TARGET_MS, load_at_start=load,
              not_judged="the first scrape and the recount are shown, not judged")  # fmt: skip


if __name__ == "__main__":
    main()
