"""A bug under /api/ answers api.md's JSON 500, `{"code": "internal"}`, and is logged with its
traceback: never Django's HTML page."""

import logging

import pytest

from queues.api import actions
from queues.api.errors import INTERNAL_DETAIL
from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db


class BrokenStore:
    """A store whose every call fails the way a bug would: an exception nobody maps."""

    def __getattr__(self, name: str):
        def fail(*args, **kwargs):
            raise RuntimeError(f"a bug in {name}")

        return fail


@pytest.fixture
def broken_store(monkeypatch):
    monkeypatch.setattr(actions.stores, "of", lambda host, queue: BrokenStore())


@pytest.mark.parametrize(
    ("who", "method", "path", "body"),
    [
        ("olga", "get", url(HOST, QUEUE, "stats"), None),
        ("alice", "post", url(HOST, QUEUE, "tasks"), {"n": 1}),
        ("bob", "post", url(HOST, QUEUE, "claim"), {"worker": "box-1"}),
    ],
)
def test_an_unexpected_exception_answers_the_json_500(
    world, broken_store, caplog, who, method, path, body
):
    world.files_only("the broken store replaces both stores alike")
    caplog.set_level(logging.ERROR, logger="queues.api.errors")
    send = getattr(world.client(who), method)
    r = send(path, body, format="json") if body is not None else send(path)
    assert r.status_code == 500
    assert r["Content-Type"] == "application/json"
    assert r.json() == {"code": "internal", "detail": INTERNAL_DETAIL}
    logged = [rec for rec in caplog.records if rec.name == "queues.api.errors"]
    assert len(logged) == 1 and path in logged[0].getMessage()
    assert logged[0].exc_info and "a bug in" in str(logged[0].exc_info[1])


@pytest.mark.urls("tests.api.broken_urls")
def test_a_bug_outside_the_api_views_still_answers_json_under_api(client):
    client.raise_request_exception = False
    r = client.get("/api/v1/broken")
    assert r.status_code == 500
    assert r["Content-Type"] == "application/json"
    assert r.json() == {"code": "internal", "detail": INTERNAL_DETAIL}


@pytest.mark.urls("tests.api.broken_urls")
def test_a_bug_in_the_console_keeps_djangos_page(client):
    client.raise_request_exception = False
    r = client.get("/console-broken/")
    assert r.status_code == 500
    assert r["Content-Type"].startswith("text/html")
