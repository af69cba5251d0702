"""The Django backend's CONCURRENCY_KEYS: which keyword argument of a task is its post's
concurrencyKey."""

from __future__ import annotations

from types import SimpleNamespace

from taskhoster.django_tasks.backend import TaskhosterBackend


def _backend(keys: dict[str, str]) -> TaskhosterBackend:
    options = {"URL": "http://127.0.0.1:9", "HOST": "h.example", "CONCURRENCY_KEYS": keys}
    return TaskhosterBackend("default", {"OPTIONS": options, "QUEUES": ["default"]})


def test_the_named_keyword_argument_is_the_key_as_a_string():
    backend = _backend({"myapp.tasks.import_customer": "customer_id"})
    task = SimpleNamespace(module_path="myapp.tasks.import_customer")
    assert backend.concurrency_key(task, {"customer_id": 7, "full": True}) == "7"
    assert backend.concurrency_key(task, {"full": True}) is None
    assert backend.concurrency_key(task, {"customer_id": None}) is None
    other = SimpleNamespace(module_path="myapp.tasks.send_mail")
    assert backend.concurrency_key(other, {"customer_id": 7}) is None
