"""The site's WSGI application (taskhoster_site.lanes): a bearer token's request to a queue
endpoint goes through the middleware the API uses, and is answered byte for byte as through
the whole of settings.MIDDLEWARE; every other request takes the whole chain."""

from __future__ import annotations

import io
import re
from typing import Any

import orjson
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from taskhoster_site import lanes
from tests.api.conftest import HOST, MISSING, QUEUE, url

pytestmark = pytest.mark.django_db
_ID, _MS = re.compile(rb"\b[0-9a-f]{16}\b"), re.compile(rb"\b1[0-9]{12}\b")
# a trace's id where a tracer is installed (another test of the process may have installed one)
_TRACE = re.compile(rb"\b[0-9a-f]{32}\b")
_AGE = re.compile(rb'(AgeMs":)[0-9]+')  # read a millisecond apart, an age may differ by one


@pytest.fixture
def handlers():
    """Both chains, inside the test's database transaction: as Django's test client does, keep
    the request signals from closing that connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield WSGIHandler(), lanes.ApiHandler()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def environ(method: str, path: str, body: Any = None, **headers: str) -> dict[str, Any]:
    data = b"" if body is None else orjson.dumps(body)
    found = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "testserver",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.input": io.BytesIO(data),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
    }
    if body is not None:
        found |= {"CONTENT_LENGTH": str(len(data)), "CONTENT_TYPE": "application/json"}
    return found | headers


def send(handler: Any, env: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    got: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        got["status"], got["headers"] = status, headers

    answer = handler(dict(env, **{"wsgi.input": io.BytesIO(env["wsgi.input"].getvalue())}),
                     start_response)  # fmt: skip
    body = b"".join(answer)
    answer.close()
    return got["status"], got["headers"], body


def masked(answer: tuple[str, list[tuple[str, str]], bytes]) -> tuple:
    status, headers, body = answer

    def mask(raw: bytes) -> bytes:
        raw = _TRACE.sub(b"<trace>", _AGE.sub(rb"\1<age>", raw))
        return _MS.sub(b"<ms>", _ID.sub(b"<id>", raw))

    return status, [(k, mask(v.encode()).decode()) for k, v in headers], mask(body)


def alike(handlers, env: dict[str, Any]) -> tuple:
    """The answer through the whole chain and through the API's, the same but for the ids and
    clock readings of what each made."""
    site, api = handlers
    whole, lean = send(site, env), send(api, env)
    assert masked(whole) == masked(lean)
    return whole


def bearer(world, who: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {world.tokens[who]}", "HTTP_ACCEPT": "application/json"}


def test_the_api_chain_is_the_sites_without_the_consoles_middleware(settings):
    chain = lanes.api_middleware(settings.MIDDLEWARE)
    assert chain == [m for m in settings.MIDDLEWARE if m not in lanes.CONSOLE_ONLY]
    assert "django.contrib.sessions.middleware.SessionMiddleware" not in chain
    assert "axes.middleware.AxesMiddleware" not in chain
    assert len(chain) == len(settings.MIDDLEWARE) - len(lanes.CONSOLE_ONLY)
    handler = lanes.ApiHandler()
    assert settings.MIDDLEWARE[:1] == ["queues.metrics.middleware.RequestFigures"]  # put back
    assert handler._middleware_chain is not None


@pytest.mark.parametrize(
    ("path", "headers", "lane"),
    [
        ("/api/v1/queues/h/q/claim", {"HTTP_AUTHORIZATION": "Bearer th_x"}, True),
        ("/api/v1/queues/h/q/claim", {"HTTP_AUTHORIZATION": "bearer th_x", "HTTP_COOKIE": "s=1"},
         True),
        ("/api/v1/queues/h/q/claim", {}, False),  # a session, or an anonymous public post
        ("/api/v1/queues/h/q/claim", {"HTTP_AUTHORIZATION": "Basic eDp5"}, False),
        ("/api/v1/queues/h/q/claim", {"HTTP_AUTHORIZATION": "Bearer th_x",
                                      "HTTP_ACCEPT": "text/html"}, False),  # a browsable page
        ("/api/v1/queues/h/q/tasks", {"HTTP_AUTHORIZATION": "Bearer th_x",
                                      "QUERY_STRING": "format=api"}, False),
        ("/api/v1/docs/", {"HTTP_AUTHORIZATION": "Bearer th_x"}, False),
        ("/api/v1/", {"HTTP_AUTHORIZATION": "Bearer th_x"}, False),
        ("/queues/", {"HTTP_AUTHORIZATION": "Bearer th_x"}, False),  # the console
    ],
)  # fmt: skip
def test_which_requests_take_the_api_lane(path, headers, lane):
    assert lanes.takes_the_api_lane({"PATH_INFO": path, **headers}) is lane


def test_a_workers_whole_round_is_answered_alike(world, handlers):
    # six posted alike, so each claim below (two here, then a claim and a report's next claim
    # for each chain) takes one of them, never one of the two posted through the chains: where
    # a tracer is installed those carry a traceparent and would make the twins differ
    for _ in range(6):
        world.post()
    worker = bearer(world, "bob")
    alike(handlers, environ("POST", url(HOST, QUEUE), {"n": 1}, **bearer(world, "alice")))
    status, _, _ = alike(handlers, environ("POST", url(HOST, QUEUE, "claim"), {"worker": "w"},
                                           **worker))  # fmt: skip
    assert status == "200 OK"

    def report(task: Any) -> dict[str, Any]:
        body = {"worker": "w", "attempt": task.attempts, "result": {}, "next": {}}
        return environ("POST", url(HOST, QUEUE, f"tasks/{task.id}/result"), body, **worker)

    site, api = handlers  # twin tasks, one reported through each chain
    whole = send(site, report(world.claim(worker="w")))
    lean = send(api, report(world.claim(worker="w")))
    assert masked(whole) == masked(lean) and whole[0] == "200 OK"
    alike(handlers, environ("GET", url(HOST, QUEUE, "stats"), **worker))


@pytest.mark.parametrize(
    ("who", "authorization", "place", "method", "rest", "status"),
    [
        ("bob", None, (HOST, QUEUE), "GET", "stats", "200 OK"),
        ("bob", None, (HOST, QUEUE), "GET", "tasks", "403 Forbidden"),
        ("alice", None, MISSING, "GET", "stats", "404 Not Found"),
        ("alice", None, (HOST, QUEUE), "GET", "no/such/path", "404 Not Found"),
        ("alice", None, (HOST, QUEUE), "DELETE", "tasks", "405 Method Not Allowed"),
        (None, "Bearer th_not_a_token", (HOST, QUEUE), "GET", "stats", "401 Unauthorized"),
        (None, "Bearer", (HOST, QUEUE), "POST", "claim", "401 Unauthorized"),
    ],
)
def test_reads_and_refusals_are_answered_alike(world, handlers, who, authorization, place,
                                               method, rest, status):  # fmt: skip
    headers = bearer(world, who) if who else {"HTTP_AUTHORIZATION": authorization,
                                              "HTTP_ACCEPT": "application/json"}  # fmt: skip
    body = {"worker": "w"} if method == "POST" else None
    env = environ(method, url(*place, rest), body, **headers)
    assert lanes.takes_the_api_lane(env)
    assert alike(handlers, env)[0] == status


def test_the_application_sends_the_api_lane_to_the_api_chain(world, handlers):
    application = lanes.Lanes()
    env = environ("GET", url(HOST, QUEUE, "stats"), **bearer(world, "bob"))
    assert send(application, env)[0] == "200 OK"
    used: list[str] = []
    application.api = lambda env, start: used.append("api") or application.site(env, start)
    send(application, env)
    send(application, environ("GET", url(HOST, QUEUE, "stats")))  # no token: the whole site
    assert used == ["api"]
