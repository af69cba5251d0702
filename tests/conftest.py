"""Fixtures shared by every test: each test gets its own items and logs directories."""

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def store_dirs(tmp_path: Path, settings) -> dict[str, Path]:
    """Point the site at fresh store directories so no test sees another's tasks."""
    items, logs = tmp_path / "items", tmp_path / "logs"
    items.mkdir()
    logs.mkdir()
    settings.TASKHOSTER_ITEMS_DIR = items
    settings.TASKHOSTER_LOGS_DIR = logs
    return {"items": items, "logs": logs}


@pytest.fixture(autouse=True)
def fresh_cache():
    """The dashboard keeps settled counts in Django's cache: no test may see another's."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


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
