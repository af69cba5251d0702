"""A small factory for the store tests: a store on tmp_path, a fixed clock, and readers of what
is on disk and in the event log (the tests assert on those, never on calls)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from queues.store import QueueSettings, QueueStore, StoreConfig, Task
from queues.store.paths import QueueDirs

HOST, QUEUE = "task.example.com", "resize"
T0 = 1_751_500_000_000  # ms; tests pass time explicitly, never sleep and never patch the clock
SETTINGS = QueueSettings()


# The modules whose tests run on both stores (the store fixture `h` is parametrised over
# "files" and "postgres" there); a test of theirs marked files_only("why") runs on files alone.
BOTH_STORES = frozenset(
    {
        "test_contract",
        "test_model",
        "test_transitions",
        "test_attempts",
        "test_idempotency_keys",
        "test_max_pending",
        "test_waiting",
        "test_sweep",
        "test_batches",
        "test_operators",
        "test_selecting",
        "test_sweep_preview",
        "test_post_order",
        "test_dependencies",
        "test_limits",
        "test_groups",
        "test_still_wanted",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_kind" not in metafunc.fixturenames:
        return
    if metafunc.module.__name__.rpartition(".")[2] not in BOTH_STORES:
        return  # the `store_kind` fixture below: files
    only_files = metafunc.definition.get_closest_marker("files_only") is not None
    metafunc.parametrize("store_kind", ["files"] if only_files else ["files", "postgres"])


def pytest_sessionfinish(session: pytest.Session) -> None:
    from . import pg

    pg.drop_database()


class Verbs:
    """The harnesses' shorthand for the common verbs (the store is `self.store`)."""

    store: Any

    def post(
        self,
        item: dict[str, Any] | None = None,
        *,
        settings: QueueSettings = SETTINGS,
        now: int = T0,
        posted_by: str | None = "alice",
        **kw: Any,
    ) -> Task:
        result = self.store.post(
            HOST, QUEUE, item or {"n": 1}, settings=settings, posted_by=posted_by, now=now, **kw
        )
        return result.task

    def claim(
        self,
        *,
        settings: QueueSettings = SETTINGS,
        now: int = T0 + 1000,
        worker: str = "box-1",
        **kw: Any,
    ) -> Task | None:
        tasks = self.store.claim(HOST, QUEUE, settings=settings, worker=worker, now=now, **kw)
        return tasks[0] if tasks else None


class Harness(Verbs):
    kind = "files"

    def __init__(self, tmp_path: Path, *, fsync: bool = False, flush: str = "fsync") -> None:
        self.config = StoreConfig(
            items_dir=tmp_path / "items", logs_dir=tmp_path / "logs", fsync=fsync, flush=flush
        )
        self.store = QueueStore(self.config)
        self.queue_dir = self.config.items_dir / HOST / QUEUE
        self._holds = contextlib.ExitStack()

    def held(self, queue: str = QUEUE, *, create: bool = False) -> QueueDirs:
        """A queue's directories, held until the store closes (for tests that write by hand)."""
        return self._holds.enter_context(self.store.queue_dirs(HOST, queue, create=create))

    def on_disk(self, task_id: str) -> dict[str, dict[str, Any]]:
        """{directory: record} for every copy of the task."""
        found = {}
        for d in ("pending", "processing", "done"):
            path = self.queue_dir / d / f"{task_id}.json"
            if path.exists():
                found[d] = orjson.loads(path.read_bytes())
        return found

    def where(self, task_id: str) -> list[str]:
        return sorted(self.on_disk(task_id))

    def events(self, task_id: str | None = None) -> list[dict[str, Any]]:
        lines = []
        for day in sorted((self.config.logs_dir / "tasks").glob("*.jsonl")):
            for raw in day.read_bytes().splitlines():
                line = orjson.loads(raw)
                if task_id is None or line["id"] == task_id:
                    lines.append(line)
        return lines

    def event_names(self, task_id: str) -> list[str]:
        return [e["event"] for e in self.events(task_id)]

    def stored(self) -> list[Any]:
        """Everything the store holds, to compare before and after a refused call."""
        return sorted(os.walk(self.config.items_dir))

    def count(self, directory: str) -> int:
        """How many tasks a state directory holds."""
        return len(list((self.queue_dir / directory).glob("*.json")))  # none: no directory

    def keys(self) -> int:
        """How many Idempotency-Keys the queue keeps."""
        keys = self.queue_dir / "keys"
        return len(list(keys.iterdir())) if keys.is_dir() else 0

    # the store's one place that writes records (QueueCore), called directly
    def write_change(self, old: Task, new: Task, event: str | None, *, now: int) -> None:
        with self.store.queue_dirs(HOST, QUEUE) as qd:
            self.store.core.apply(qd, "pending", old, new, event, now=now, settings=SETTINGS)

    def write_removal(self, task: Task, *, now: int) -> None:
        with self.store.queue_dirs(HOST, QUEUE) as qd:
            self.store.core.remove(qd, task, now=now)

    def write_new(self, task: Task, *, now: int) -> None:
        with self.store.queue_dirs(HOST, QUEUE) as qd:
            self.store.core.admit(qd, task, now=now, settings=SETTINGS)

    def plant(self, directory: str, record: dict[str, Any]) -> None:
        """Write a record by hand into a state directory."""
        folder = self.queue_dir / directory
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{record['id']}.json").write_bytes(orjson.dumps(record))

    def opener(self, *, fsync: bool = False) -> Any:
        """How a child process opens this store (procs.StoreOpener)."""
        from .procs import StoreOpener

        return StoreOpener(str(self.config.items_dir), str(self.config.logs_dir), fsync=fsync)

    def archived_tasks(self) -> list[str]:
        """The ids of the tasks with an archive folder in the queue."""
        folder = self.config.logs_dir / "tasks-payloads" / HOST / QUEUE
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def archive(self, task_id: str) -> dict[str, bytes]:
        """{file name: bytes} of the task's archived payloads."""
        folder = self.config.logs_dir / "tasks-payloads" / HOST / QUEUE / task_id
        return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}

    def temp_files(self) -> list[str]:
        return [
            n
            for _, _, names in os.walk(self.config.items_dir)
            for n in names
            if n.startswith(".tmp-")
        ]

    def close(self) -> None:
        self._holds.close()
        self.store.close()

    def reopen(self) -> None:
        """A restart: drop every in-process state and open the same directories afresh."""
        self.close()
        self.store = QueueStore(self.config)


@pytest.fixture
def store_kind() -> str:
    """Which store `h` is: files, unless the module runs on both (pytest_generate_tests)."""
    return "files"


@pytest.fixture
def h(tmp_path: Path, store_kind: str) -> Any:
    if store_kind == "postgres":
        from . import pg

        pg_harness = pg.PgHarness()
        yield pg_harness
        pg_harness.drop()
        return
    harness = Harness(tmp_path)
    yield harness
    harness.close()
