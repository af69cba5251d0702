"""The API tests' world: one host with two queues, a second host, and a caller per role.

Every test that uses the world runs twice: on file queues and on PostgreSQL queues (the
latter in the PostgreSQL run of the suite, or with TASKHOSTER_PG_STORE_URL; it skips else).

`alice` produces on the own queue, `bob` works it, `olga` operates it; `paula` is a second
producer there (her tasks are foreign to alice); `mallory` produces on the other queue and the
other host, whose tasks are foreign to everyone above.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from rest_framework.test import APIClient

from queues import stores
from queues.auth.tokens import issue_token
from queues.models import Queue
from queues.services import get_or_create_user, grant
from queues.store import NotFound, Task
from queues.store.interface import TaskStore

HOST, QUEUE = "task.example.com", "resize"
OTHER_QUEUE = (HOST, "thumbs")
OTHER_HOST = ("other.example.org", "resize")
MISSING = (HOST, "missing")
BASE = "/api/v1/queues"


def url(host: str, queue: str, rest: str = "tasks") -> str:
    return f"{BASE}/{host}/{queue}/{rest}"


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@dataclass
class World:
    queues: dict[str, Queue]
    tokens: dict[str, str]
    kind: str  # the queues' store: files or postgres
    clients: dict[str, APIClient] = field(default_factory=dict)

    @property
    def store(self) -> TaskStore:
        """The store of the world's queues (all of one kind)."""
        return stores.router().backend(self.kind)

    @property
    def on_postgres(self) -> bool:
        return self.kind == "postgres"

    def written(self) -> Any:
        """What the store holds, to compare before and after a refusal that must write
        nothing: every file under the store's directories, or on PostgreSQL every task row
        (id and rev) and event row of the world's queues."""
        if not self.on_postgres:
            return tree(Path(stores.router().config.items_dir).parent)
        held = {}
        for queue in self.queues.values():
            place = (queue.host.name, queue.name)
            try:
                tasks = self.store.list_tasks(*place, limit=1000).tasks
            except NotFound:  # nothing ever posted there
                tasks = []
            events = stores.router().postgres.events_since(*place, 0, 10_000)
            held[place] = (sorted((task.id, task.rev) for task in tasks), len(events))
        return held

    def files_only(self, why: str) -> None:
        """Skip the PostgreSQL run of a test about the file store's own ground, saying why."""
        if self.on_postgres:
            pytest.skip(f"files only: {why}")

    def client(self, who: str) -> APIClient:
        if who not in self.clients:
            self.clients[who] = bearer(self.tokens[who]) if who in self.tokens else APIClient()
        return self.clients[who]

    def post(
        self,
        place: tuple[str, str] = (HOST, QUEUE),
        *,
        by: str | None = "alice",
        item: dict[str, Any] | None = None,
        **kw: Any,
    ) -> Task:
        """Post straight to the store (the API's own post is tested through HTTP)."""
        queue = Queue.objects.get(host__name=place[0], name=place[1])
        return self.store.post(
            *place, item or {"n": 1}, settings=queue.to_settings(), posted_by=by, **kw
        ).task

    def events(self, task_id: str) -> list[dict[str, Any]]:
        """The task's lines in the event log, oldest first."""
        if self.on_postgres:  # the store's event rows, as lines
            rows = stores.router().postgres.events_since
            return [line for queue in self.queues.values()
                    for _, line in rows(queue.host.name, queue.name, 0, 10_000)
                    if line["id"] == task_id]  # fmt: skip
        lines = []
        for day in sorted((stores.router().config.logs_dir / "tasks").glob("*.jsonl")):
            for raw in day.read_bytes().splitlines():
                line = orjson.loads(raw)
                if line["id"] == task_id:
                    lines.append(line)
        return lines

    def claim(self, place: tuple[str, str] = (HOST, QUEUE), worker: str = "box-1") -> Task:
        queue = Queue.objects.get(host__name=place[0], name=place[1])
        return self.store.claim(*place, settings=queue.to_settings(), worker=worker)[0]


@pytest.fixture(autouse=True)
def fast_store(settings) -> None:
    # Durability is the store tests' subject; here fsync only slows the suite down.
    settings.TASKHOSTER_FSYNC = False


@pytest.fixture
def world(make_queue, store_kind) -> World:
    queues = {
        "own": make_queue(HOST, QUEUE, store=store_kind),
        "other_queue": make_queue(*OTHER_QUEUE, store=store_kind),
        "other_host": make_queue(*OTHER_HOST, store=store_kind),
    }
    grants = [
        ("alice", "producer", "own"),
        ("paula", "producer", "own"),
        ("bob", "worker", "own"),
        ("olga", "operator", "own"),
        ("mallory", "producer", "other_queue"),
        ("mallory", "producer", "other_host"),
        ("mallory", "worker", "other_queue"),
        ("mallory", "worker", "other_host"),
    ]
    for user, role, place in grants:
        queue = queues[place]
        grant(user, f"{queue.host.name}/{queue.name}", role)
    tokens = {
        who: issue_token(get_or_create_user(who), "test")[1]
        for who in ("alice", "paula", "bob", "olga", "mallory")
    }
    return World(queues=queues, tokens=tokens, kind=store_kind)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its content (None for a directory): what "nothing was
    written" is compared against."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found
