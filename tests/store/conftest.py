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


class Harness:
    def __init__(self, tmp_path: Path, *, fsync: bool = False) -> None:
        self.config = StoreConfig(
            items_dir=tmp_path / "items", logs_dir=tmp_path / "logs", fsync=fsync
        )
        self.store = QueueStore(self.config)
        self.queue_dir = self.config.items_dir / HOST / QUEUE
        self._holds = contextlib.ExitStack()

    def held(self, queue: str = QUEUE, *, create: bool = False) -> QueueDirs:
        """A queue's directories, held until the store closes (for tests that write by hand)."""
        return self._holds.enter_context(self.store.queue_dirs(HOST, queue, create=create))

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
def h(tmp_path: Path) -> Any:
    harness = Harness(tmp_path)
    yield harness
    harness.close()
