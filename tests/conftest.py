"""Fixtures shared by every test (each gets its own items and logs directories), and which tests
the suite's PostgreSQL pass runs.

The suite runs twice (`make test`): on SQLite, every test; then on PostgreSQL (`make
test-postgres`, Django's database given by DATABASE_URL), only the tests that can tell the two
databases apart: those that use Django's database (the `db` or `transactional_db` fixture, the
`django_db` mark, or a fixture that asks for them, such as `make_queue` and `pg_store`) and those
marked `postgres` (they ask DATABASE_URL for a server of their own). Everything else (the store's
own tests, the live servers on their own SQLite files, the CLI, parsers, docs) passed in the
first pass and would only repeat it. A test that reaches the database some other way, say a child
process handed DATABASE_URL, is marked `postgres` so that the second pass keeps it. Of the API's
tests run once per store (`store_kind`), the second pass keeps the `postgres` run only: the file
store's run reaches Django's database exactly as its sibling does (tokens, grants, the queue's
settings, the same views), and its store side is the first pass's.
"""

import os
import shutil
import signal
from pathlib import Path

import pytest

from queues.metrics import multiproc

# A run started in the background by a non-interactive shell (`make test &`, nohup, a CI
# runner's script) inherits SIGINT ignored, and so would every child the tests start: the
# tests that stop a sweep loop, a follower or `taskhoster watch` with Ctrl-C would wait for
# ever. The children get the disposition a terminal gives them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Every server and sweep loop a test starts keeps its figures' files under its own var/ (a
# relative TASKHOSTER_METRICS_DIR is taken under the var/ directory it is given), not in a
# directory of /dev/shm that would outlive the run; a child given an environment of its own
# says so itself. This process reads <settings.VAR_DIR>/metrics, a directory of each test's own
# (store_dirs), so no in-process scrape reads a server's files.
os.environ[multiproc.CHOSEN] = "metrics"

# how `make test` hands the tests to its workers (longest first, long modules split)
pytest_plugins = ["tests.scheduling"]

# The fixtures through which a test reaches Django's database (pytest-django's own names).
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
    }
)


def uses_the_database(item: pytest.Item) -> bool:
    """Whether the test can tell SQLite from PostgreSQL: see the module's docstring."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & DATABASE_FIXTURES:
        return True
    return any(item.iter_markers("django_db")) or any(item.iter_markers("postgres"))


def repeats_its_postgres_sibling(item: pytest.Item) -> bool:
    """An API test's run on a file-store queue (see the module's docstring)."""
    callspec = getattr(item, "callspec", None)
    in_api = item.path.parent.name == "api" and item.path.parent.parent.name == "tests"
    return in_api and callspec is not None and callspec.params.get("store_kind") == "files"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On PostgreSQL, leave out (deselect, counted in pytest's summary) what the SQLite pass
    already ran to the same end."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    kept, left_out = [], []
    for item in items:
        keep = uses_the_database(item) and not repeats_its_postgres_sibling(item)
        (kept if keep else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


@pytest.fixture(autouse=True)
def store_dirs(tmp_path: Path, settings) -> dict[str, Path]:
    """Point the site at fresh store directories (and var/) so no test sees another's tasks
    or server figures."""
    items, logs = tmp_path / "items", tmp_path / "logs"
    items.mkdir()
    logs.mkdir()
    settings.TASKHOSTER_ITEMS_DIR = items
    settings.TASKHOSTER_LOGS_DIR = logs
    settings.VAR_DIR = tmp_path / "var"
    return {"items": items, "logs": logs}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail a run that left server figures in /dev/shm: a directory there of a var/ under this
    run's temporary directory is a server or sweep loop started without TASKHOSTER_METRICS_DIR
    (each is tiny, but they pile up run after run). Removed, and named."""
    if hasattr(session.config, "workerinput") or not multiproc.MEMORY.is_dir():
        return  # the controller looks once, after every worker ended
    base = session.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    mine = set()
    for where, dirs, _ in os.walk(base):
        for name in dirs:  # a var/ that was never made (its server made nothing in it) too
            mine.update(map(multiproc.in_memory, (Path(where) / name, Path(where) / name / "var")))
    left = sorted(p for p in multiproc.MEMORY.glob("taskhoster-metrics-*") if p in mine)
    for path in left:
        shutil.rmtree(path, ignore_errors=True)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"{len(left)} server figures' directories left in "
                                f"{multiproc.MEMORY} (now removed): a test's server or sweep "
                                f"loop without TASKHOSTER_METRICS_DIR", red=True)  # fmt: skip
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def fresh_cache():
    """The dashboard keeps settled counts in Django's cache, the router each queue's store
    kind: no test may see another's."""
    from django.core.cache import cache

    from queues.stores.kinds import forget_kinds

    cache.clear()
    forget_kinds()
    yield
    cache.clear()
    forget_kinds()


@pytest.fixture
def make_queue(db):
    """A small factory: `make_queue("h.example", "q", lease_seconds=30)`."""
    from queues.services import save_queue

    def make(host: str = "task.example.com", name: str = "resize", **fields):
        return save_queue(host, name, **fields)[0]

    return make


@pytest.fixture
def resize(make_queue):
    """The console tests' usual queue: task.example.com/resize."""
    return make_queue("task.example.com", "resize")


@pytest.fixture
def other(make_queue):
    """A queue on another host, for what one queue's users must not see of another."""
    return make_queue("other.example.com", "secret")


PG_SKIP = (
    "a PostgreSQL queue needs a PostgreSQL database: it runs in the PostgreSQL run of the "
    "suite (make test-postgres), or under SQLite with TASKHOSTER_PG_STORE_URL set"
)


@pytest.fixture
def pg_store(settings, db):
    """The PostgreSQL store for this test's postgres queues, in a schema of its own that is
    dropped afterwards (the store commits on its own connections, outside the test's
    transaction, so rolling that back would not undo its tasks). Skips without PostgreSQL."""
    import secrets

    import psycopg
    from psycopg import sql

    from queues.stores import close_postgres_stores
    from queues.stores.kinds import forget_kinds
    from queues.stores.pg_location import TASK_LOGS_TABLE, pg_location

    settings.TASKHOSTER_PG_STORE_SCHEMA = f"th_test_{secrets.token_hex(6)}"
    location = pg_location()
    if location is None:
        pytest.skip(PG_SKIP)
    forget_kinds()
    yield location
    close_postgres_stores()
    with psycopg.connect(location.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(location.schema)))  # fmt: skip
        if location.shares_console_db:  # its events went to Task Logs' table, in public
            conn.execute(sql.SQL("DELETE FROM {} WHERE file = 'postgres'").format(
                sql.Identifier(TASK_LOGS_TABLE)))  # fmt: skip


@pytest.fixture(params=["files", "postgres"])
def store_kind(request) -> str:
    """Run the test on a queue of each store; the postgres run needs a PostgreSQL database
    (pg_store), and skips without one."""
    if request.param == "postgres":
        request.getfixturevalue("pg_store")
    return request.param
