"""Task Logs benchmark: ingestion rate on SQLite, and list pages over 10 million events.

    .venv/bin/python bench/logs_bench.py [--lines 1000000] [--events 10000000] [--skip-postgres]
        [--skip-pages] [--bench-db taskhoster_bench]

1. Ingestion: writes a backfill of --lines event lines (three day-files) to a temp directory and
   ingests it into a throw-away SQLite database, and then into the PostgreSQL database
   --bench-db (created and dropped), beside two baselines on the same lines in the same run:
   reading and `orjson.loads` alone (the ceiling of any Python ingester), and reading and
   `parse_line` (our validation, no database). On PostgreSQL, the floor of the database's own
   work follows: the same rows (as COPY's text, taken from the table after the ingestion) copied
   into the emptied table again in chunks of the ingester's size, with its indexes and then
   without any; and where the server runs on this machine, each row's CPU time of the server
   process (read from /proc), beside the ingester's.
2. Pages: creates the PostgreSQL database --bench-db (dropped afterwards), fills it with
   --events rows by one server-side INSERT ... SELECT generate_series, and times the event
   list's first page and a page 5 million rows deep through the Django test client, as staff
   and as the operator of one queue, with and without a filter; plus a task's timeline.

Each part runs in a child process with its own DATABASE_URL, so the site's settings are
the production ones. Target: < 100 ms per page. Ingestion has no target any more: SQLite met
its 50,000 lines/s, and PostgreSQL's rate (about 30,000 lines/s) is several times the event rate
of the store's fastest durable drain (three lines a task); its rows stay, to see it move.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "taskhoster_bench"
QUEUES = [(f"h{h}.example.com", f"q{q}") for h in range(2) for q in range(10)]
DAY = 1_735_689_600  # 2025-01-01


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines to ingest")
    parser.add_argument("--events", type=int, default=10_000_000, help="rows for the pages")
    parser.add_argument("--repeat", type=int, default=15, help="requests per page timing")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres",
                        help="a server where CREATE DATABASE is allowed")  # fmt: skip
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-pages", action="store_true", help="ingestion only")
    parser.add_argument("--bench-db", default=BENCH_DB, help="the throw-away database's name")
    parser.add_argument("--phase", choices=("ingest", "pages"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    return parser.parse_args()


# --- the child processes -------------------------------------------------------------------


def _django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskhoster_site.settings")
    import django

    django.setup()


def write_backfill(folder: Path, lines: int) -> int:
    import orjson

    events = ("posted", "claimed", "progress", "result", "fetched")
    statuses = ("pending", "processing", "processing", "finished", "finished")
    size = 0
    per_day = -(-lines // 3)
    for day in range(3):
        out = []
        for i in range(day * per_day, min(lines, (day + 1) * per_day)):
            t = DAY + day * 86_400 + (i - day * per_day) * 86_000 // per_day
            host, queue = QUEUES[i % len(QUEUES)]
            n = (i // len(QUEUES)) % 5
            at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{i % 1000:03d}Z"
            out.append(orjson.dumps({
                "t": t, "at": at, "host": host, "queue": queue, "id": f"{i // 5:016x}",
                "event": events[n], "status": statuses[n], "attempts": 1 if n else 0,
                "worker": f"box-{i % 7}" if n in (1, 2, 3) else None,
                "bytes": {"item": 120, "progress": 40 if n >= 2 else 0,
                          "result": 300 if n >= 3 else 0, "error": 0},
                "archived": ["item"] if n == 0 else [],
            }))  # fmt: skip
        data = b"\n".join(out) + b"\n"
        (folder / time.strftime("%Y-%m-%d.jsonl", time.gmtime(DAY + day * 86_400))).write_bytes(
            data
        )
        size += len(data)
    return size


def phase_ingest(folder: Path, lines: int) -> dict[str, float]:
    import orjson

    _django()
    from django.core.management import call_command
    from django.db import connection

    from tasklogs.ingest import ingest_directory
    from tasklogs.models import TaskEvent
    from tasklogs.parsing import parse_line

    source = folder / "tasks"
    source.mkdir(parents=True)
    size = write_backfill(source, lines)
    files = sorted(source.iterdir())

    def rates(run) -> tuple[float, float]:
        """Lines per wall second and per CPU second of this process: on a shared machine the
        second shows what the code costs when other work takes the cores away."""
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        return lines / (time.perf_counter() - wall), lines / (time.process_time() - cpu)

    def each_line(work) -> None:
        for path in files:
            for raw in path.read_bytes().split(b"\n")[:-1]:
                work(raw)

    loads = rates(lambda: each_line(orjson.loads))
    parse = rates(lambda: each_line(parse_line))
    call_command("migrate", verbosity=0)
    reports = []
    server = server_cpu()
    ingest = rates(lambda: reports.append(ingest_directory(source)))
    ingest_server = server()
    assert reports[0].lines == lines and reports[0].bad == 0, reports
    assert TaskEvent.objects.count() == lines
    started = time.perf_counter()
    ingest_directory(source)  # nothing new: the --follow steady state
    idle_ms = (time.perf_counter() - started) * 1000
    found = {"loads": loads, "parse": parse, "ingest": ingest, "mb": size / 1e6,
             "idle_ms": idle_ms, "load": os.getloadavg()[0]}  # fmt: skip
    if ingest_server:
        found["ingest_server"] = lines / ingest_server
    if connection.vendor == "postgresql":
        found.update(copy_floor(folder, lines))
    return found


def server_cpu():  # type: ignore[no-untyped-def]
    """A function giving the CPU seconds this connection's server process used since this call,
    or 0 where that process is not on this machine (or not PostgreSQL)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return lambda: 0.0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        stat = Path(f"/proc/{cursor.fetchone()[0]}/stat")

    def used() -> float:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    first = used()
    return lambda: used() - first if first else 0.0


def copy_floor(folder: Path, lines: int) -> dict[str, tuple[float, float]]:
    """COPY of the stored rows into the emptied table, one transaction per chunk of the
    ingester's size: with the table's indexes, then with none. (wall, server CPU) lines/s."""
    from django.db import connection
    from psycopg import sql

    from tasklogs.ingest import CHUNK_BYTES
    from tasklogs.inserting import COLUMNS
    from tasklogs.models import TaskEvent

    meta = TaskEvent._meta
    table = sql.Identifier(meta.db_table)
    columns = sql.SQL(", ").join(sql.Identifier(meta.get_field(n).column) for n in COLUMNS)
    dump = folder / "rows.copy"
    connection.ensure_connection()
    raw = connection.connection  # psycopg's own connection: COPY and composed SQL
    with raw.cursor() as cursor, dump.open("wb") as out:
        query = sql.SQL("COPY (SELECT {c} FROM {t} ORDER BY id) TO STDOUT").format(
            c=columns, t=table
        )
        with cursor.copy(query) as copy:
            for data in copy:
                out.write(data)
    rows = dump.read_bytes()
    chunks, start = [], 0
    while start < len(rows):
        end = rows.rfind(b"\n", start, start + CHUNK_BYTES) + 1 or len(rows)
        chunks.append(rows[start:end])
        start = end

    def copy_all() -> tuple[float, float]:
        with raw.cursor() as cursor:
            cursor.execute(sql.SQL("TRUNCATE {t}").format(t=table))
            cursor.execute("CHECKPOINT")  # as the ingestion began: no dirty pages to write
        server = server_cpu()
        started = time.perf_counter()
        for chunk in chunks:
            with raw.transaction(), raw.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
                with cursor.copy(
                    sql.SQL("COPY {t} ({c}) FROM STDIN").format(t=table, c=columns)
                ) as copy:
                    copy.write(chunk)
        wall = time.perf_counter() - started
        used = server()
        return lines / wall, lines / used if used else 0.0

    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
    indexed = copy_all()
    with raw.cursor() as cursor:
        for index in meta.indexes:
            cursor.execute(sql.SQL("DROP INDEX {i}").format(i=sql.Identifier(index.name)))
        for constraint in meta.constraints:
            cursor.execute(sql.SQL("ALTER TABLE {t} DROP CONSTRAINT {c}").format(
                t=table, c=sql.Identifier(constraint.name)))  # fmt: skip
    bare = copy_all()
    return {"floor_indexed": indexed, "floor_bare": bare}


FILL = """
INSERT INTO tasklogs_taskevent (t, at, host, queue, task_id, event, status, attempts, worker,
    bytes_item, bytes_progress, bytes_result, bytes_error, archived, file, "offset", digest)
SELECT extract(epoch FROM at)::bigint, at, 'h' || (g %% 20 / 10) || '.example.com',
       'q' || (g %% 10), lpad(to_hex(g / 5), 16, '0'),
       (ARRAY['posted','claimed','progress','result','fetched'])[g / 20 %% 5 + 1],
       (ARRAY['pending','processing','processing','finished','finished'])[g / 20 %% 5 + 1],
       1, 'box-' || (g %% 7), 120, 40, 300, 0, '', 'bench.jsonl', g, g
FROM (SELECT g, timestamptz '2025-01-01' + g * interval '50 milliseconds' AS at
      FROM generate_series(1, %s) AS g) AS rows
"""


def phase_pages(events: int, repeat: int) -> dict[str, float]:
    _django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from queues.services import grant, save_queue

    setup_test_environment()  # the test client's host, no e-mail
    call_command("migrate", verbosity=0)
    for host, queue in QUEUES:
        save_queue(host, queue)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(FILL, [events])
        cursor.execute("ANALYZE tasklogs_taskevent")
        # The row half-way down the list, found once, for the deep pages' cursors.
        cursor.execute("SELECT at, id FROM tasklogs_taskevent ORDER BY at DESC, id DESC "
                       "OFFSET %s LIMIT 1", [events // 2])  # fmt: skip
        at, pk = cursor.fetchone()
    fill_s = time.perf_counter() - started
    deep = f"{(at - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)}-{pk}"

    staff = Client()
    staff.force_login(get_user_model().objects.create_user("bench-staff", is_staff=True))
    grant("bench-operator", "h0.example.com/q3", "operator")
    operator = Client()
    operator.force_login(get_user_model().objects.get(username="bench-operator"))

    def timed(client: Client, url: str, *, pages: bool = True) -> float:
        assert client.get(url).status_code == 200, url  # warm: plans and caches
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            response = client.get(url)
            samples.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, url
            assert not pages or b'rel="next"' in response.content, url  # a full page, more after
        return statistics.median(samples)

    # Row g lands in queue h{g % 20 // 10}/q{g % 10} with task id g // 5: task 0 is rows 1-4.
    return {
        "fill_s": fill_s,
        "staff first": timed(staff, "/logs/"),
        "staff deep": timed(staff, f"/logs/?before={deep}"),
        "staff first, event=claimed": timed(staff, "/logs/?event=claimed"),
        "staff deep, event=claimed": timed(staff, f"/logs/?event=claimed&before={deep}"),
        "operator of 1 queue, first": timed(operator, "/logs/"),
        "operator of 1 queue, deep": timed(operator, f"/logs/?before={deep}"),
        "a task's timeline": timed(staff, "/logs/h0.example.com/q3/0000000000000000/", pages=False),
    }


# --- the parent ------------------------------------------------------------------------------


def child(phase: str, env: dict[str, str], *args: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--phase", phase, *args]
    done = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{phase} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def postgres_url(base: str, name: str) -> str:
    return base.rsplit("/", 1)[0] + "/" + name


def run_postgres(
    args: argparse.Namespace, env: dict[str, str], phase: str, *phase_args: str
) -> dict[str, float] | None:
    """`phase` in a child on a fresh PostgreSQL database --bench-db, dropped afterwards."""
    import psycopg

    try:
        admin = psycopg.connect(args.postgres, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        print(f"skipping the PostgreSQL part: {str(exc).strip().splitlines()[0]}")
        return None
    db = args.bench_db
    with admin:
        admin.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.execute(f"CREATE DATABASE {db}")
        try:
            return child(phase, {**env, "DATABASE_URL": postgres_url(args.postgres, db)},
                         *phase_args)  # fmt: skip
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def print_ingest(title: str, ingest: dict[str, float]) -> None:
    print(f"\n{title} (load average {ingest['load']:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'':44}{'lines/s':>12}{'per CPU-s':>12}")
    for label, key in (("baseline: read + orjson.loads", "loads"),
                       ("baseline: read + parse_line (no database)", "parse"),
                       ("ingest_tasklogs (parse + insert + cursor)", "ingest")):  # fmt: skip
        wall, cpu = ingest[key]
        print(f"{label:44}{wall:>12,.0f}{cpu:>12,.0f}")
    print(f"{'a run with nothing new':44}{ingest['idle_ms']:>9.1f} ms")
    if "floor_indexed" in ingest:
        print(f"{'':44}{'lines/s':>12}{'per server CPU-s':>18}")
        if ingest.get("ingest_server"):
            print(f"{'ingest_tasklogs (the server process)':44}{ingest['ingest'][0]:>12,.0f}"
                  f"{ingest['ingest_server']:>18,.0f}")  # fmt: skip
        for label, key in (("floor: COPY of the rows, the table's indexes", "floor_indexed"),
                           ("floor: COPY of the rows, no index", "floor_bare")):  # fmt: skip
            wall, server = ingest[key]
            shown = f"{server:>18,.0f}" if server else f"{'(not local)':>18}"
            print(f"{label:44}{wall:>12,.0f}{shown}")


def main() -> None:
    args = parse_args()
    if args.phase == "ingest":
        print(json.dumps(phase_ingest(Path(args.dir), args.lines)))
        return
    if args.phase == "pages":
        print(json.dumps(phase_pages(args.events, args.repeat)))
        return
    print("$ " + shlex.join([".venv/bin/python", "bench/logs_bench.py", *sys.argv[1:]]))
    with tempfile.TemporaryDirectory(prefix="logs-bench-") as tmp:
        env = {
            "SECRET_KEY": "bench-only",
            "TASKHOSTER_VAR_DIR": tmp,
            "TASKHOSTER_HTTPS": "0",
            "ALLOWED_HOSTS": "testserver",
            "LOG_LEVEL": "WARNING",
            "TASKHOSTER_LOGS_DIR": f"{tmp}/logs",
            "TASKHOSTER_ITEMS_DIR": f"{tmp}/items",
        }
        ingest = child("ingest", {**env, "DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3"},
                       "--dir", f"{tmp}/sqlite", "--lines", str(args.lines))  # fmt: skip
        pg_ingest = pages = None
        if not args.skip_postgres:
            pg_ingest = run_postgres(args, env, "ingest", "--dir", f"{tmp}/postgres",
                                     "--lines", str(args.lines))  # fmt: skip
        if not (args.skip_postgres or args.skip_pages):
            pages = run_postgres(args, env, "pages", "--events", str(args.events),
                                 "--repeat", str(args.repeat))  # fmt: skip
    size = f"{args.lines:,} lines ({ingest['mb']:.0f} MB, 3 day-files)"
    print_ingest(f"ingestion of {size}, SQLite", ingest)
    if pg_ingest:
        print_ingest(f"ingestion of {size}, PostgreSQL", pg_ingest)
    if pages:
        filled = pages.pop("fill_s")
        print(f"\nthe event list over {args.events:,} events, PostgreSQL "
              f"(filled in {filled:.0f} s), median of {args.repeat} requests")  # fmt: skip
        print(f"{'page':44}{'ms':>12}")
        for name, ms in pages.items():
            verdict = "ok" if ms < 100 else "MISSED"
            print(f"{name:44}{ms:>12.1f}   target < 100 ms: {verdict}")


if __name__ == "__main__":
    main()
