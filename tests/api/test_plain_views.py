"""The hot endpoints' plain views (queues.api.plain) answer what their DRF views answer, byte
for byte: the status, every header in its order, and the body, for each success and refusal.

Each request is sent twice through the whole site (every middleware), once routed to the plain
view and once to the DRF view (`cls.as_view()`, the route before queues.api.plain). A request
that changes nothing is sent as it is both times; one that changes the queue (a post, a claim,
a report) is sent on twin tasks, and the two answers compared with the twins' ids and clock
readings masked, which is all that tells two twins apart.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle

from queues.api import plain, views
from queues.api import urls as api_urls
from tests.api.conftest import HOST, MISSING, OTHER_QUEUE, QUEUE, url

pytestmark = pytest.mark.django_db
TASKS, CLAIM = url(HOST, QUEUE), url(HOST, QUEUE, "claim")
BATCH, FINISH = url(HOST, QUEUE, "tasks/batch"), url(HOST, QUEUE, "finish")
HOT = {"claim", "tasks", "post-many", "task", "result", "finish-many", "fail", "progress"}
JSON = "application/json"


class Routes:
    """Switches the hot routes between their plain views and their DRF views."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.patterns = {p.name: p for p in api_urls.urlpatterns if p.name in HOT}
        self.plain = {name: p.callback for name, p in self.patterns.items()}
        self.drf = {name: cb.cls.as_view() for name, cb in self.plain.items()}

    def use(self, which: dict[str, Any]) -> None:
        for name, pattern in self.patterns.items():
            self.monkeypatch.setattr(pattern, "callback", which[name])


@pytest.fixture
def routes(monkeypatch) -> Routes:
    return Routes(monkeypatch)


def answer(response: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    return response.status_code, list(response.items()), response.content


def both(routes: Routes, send: Callable[[], Any], *, plain_path: bool = True) -> tuple:
    """The answer through the plain view, then through the DRF view. The plain route must
    have answered without DRF's dispatch (a DRF view answers a DRF Response), else this
    would compare DRF with itself."""
    routes.use(routes.plain)
    first = send()
    assert isinstance(first, Response) is not plain_path, "the plain path was (not) taken"
    routes.use(routes.drf)
    second = send()
    assert isinstance(second, Response)
    routes.use(routes.plain)
    return answer(first), answer(second)


def same(routes: Routes, send: Callable[[], Any], *, plain_path: bool = True) -> tuple:
    ours, drfs = both(routes, send, plain_path=plain_path)
    assert ours == drfs
    return ours


def through_drf(routes: Routes, send: Callable[[], Any]) -> int:
    """A request the plain route hands to the DRF view itself: the same code answers it, so
    only the hand-over is checked (the browsable page's CSRF token differs at each call)."""
    ours, drfs = both(routes, send, plain_path=False)
    assert ours[0] == drfs[0]
    return ours[0]


# 16 hex digits: a task id (or a span's, in a traceparent); 32: a trace id (a post's span, once
# a test has set up an OpenTelemetry provider); 13 digits: epoch milliseconds (posted, updated,
# lease until ...)
_ID, _TRACE = re.compile(rb"\b[0-9a-f]{16}\b"), re.compile(rb"\b[0-9a-f]{32}\b")
_MS = re.compile(rb"\b1[0-9]{12}\b")


def _masked(value: bytes) -> bytes:
    return _MS.sub(b"<ms>", _ID.sub(b"<id>", _TRACE.sub(b"<trace>", value)))


def twins(routes: Routes, send: Callable[[], Any]) -> tuple:
    """Compare two answers that differ only in the task ids, trace ids and clock readings of
    their twin tasks: everything else, header and JSON key order included, must be the same."""
    ours, drfs = both(routes, send)
    masked = [
        (status, [(k, _masked(v.encode()).decode()) for k, v in headers], _masked(body))
        for status, headers, body in (ours, drfs)
    ]
    assert masked[0] == masked[1]
    return ours


def test_the_hot_routes_are_plain_views_of_their_drf_views(routes):
    assert set(routes.plain) == HOT
    for callback in routes.plain.values():
        assert callback.__module__ == plain.__name__
        assert callback.csrf_exempt and callback.cls.__module__ == views.__name__


# -- producers ------------------------------------------------------------------------------


def test_a_post_and_an_idempotent_replay(world, routes):
    alice = world.client("alice")
    status, headers, body = twins(routes, lambda: alice.post(TASKS, {"n": 1}, format="json"))
    assert status == 201 and ("Location", reverse("queues:api:task", args=[
        HOST, QUEUE, orjson.loads(body)["id"]])) in headers  # fmt: skip
    assert ("Allow", "GET, POST, HEAD, OPTIONS") in headers and ("Vary", "Accept") in headers
    key = {"HTTP_IDEMPOTENCY_KEY": "k-1"}
    alice.post(TASKS, {"n": 1}, format="json", **key)
    status, headers, _ = same(routes, lambda: alice.post(TASKS, {"n": 1}, format="json", **key))
    assert status == 200 and ("Idempotent-Replayed", "true") in headers
    status, _, body = same(routes, lambda: alice.post(TASKS, {"n": 2}, format="json", **key))
    assert (status, orjson.loads(body)["code"]) == (422, "idempotency_key_reused")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "a": 2}',
        b'{"a": NaN}',
        b'{"a": 1e400}',
        b'{"a": "\\ud800"}',
        b'{"a": "\xff"}',
        b"[" * 65 + b"]" * 65,
        b"",
        b'{"a": ',
    ],
)
def test_a_body_that_is_not_json_is_refused_alike(world, routes, raw):
    alice = world.client("alice")
    status, _, body = same(routes, lambda: alice.generic("POST", TASKS, raw, content_type=JSON))
    assert (status, orjson.loads(body)["code"]) == (400, "invalid_json")


@pytest.mark.parametrize(
    ("content_type", "status", "code"),
    [("", 415, "unsupported_media_type"), ("text/plain", 415, "unsupported_media_type"),
     ("application/json; charset=utf-8", 201, None), ("x" * 300, 415, "unsupported_media_type")],
)  # fmt: skip
def test_a_body_of_another_type_is_refused_alike(world, routes, content_type, status, code):
    alice = world.client("alice")
    send = lambda: alice.generic("POST", TASKS, b'{"n": 1}', content_type=content_type)  # noqa: E731
    got, _, body = twins(routes, send) if code is None else same(routes, send)
    assert got == status and (code is None or orjson.loads(body)["code"] == code)


@pytest.mark.parametrize(
    ("raw", "content_type", "terminated", "status"),
    [(b'{"n": 1}', JSON, True, 201), (b'{"n": 1}', JSON, False, 411), (b"", JSON, True, 400),
     (b'{"n": 1}', "text/plain", True, 415)],
)  # fmt: skip
def test_a_chunked_body_alike(world, routes, raw, content_type, terminated, status):
    """A body without a Content-Length, as a server that de-chunks it hands it over (or one
    that cannot end it: 411)."""
    extra = {"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_TYPE": content_type}
    if terminated:
        extra["wsgi.input_terminated"] = True
    alice = world.client("alice")

    def send() -> Any:
        return alice.generic("POST", TASKS, content_type=None, **extra,
                             **{"wsgi.input": io.BytesIO(raw)})  # fmt: skip

    assert twins(routes, send)[0] == status


def test_an_item_that_is_no_object_and_a_bad_query_are_refused_alike(world, routes):
    alice = world.client("alice")
    for path, item in ((TASKS, [1]), (TASKS + "?delay=-1", {"n": 1}), (TASKS + "?after=zz", {})):
        status, _, _ = same(routes, lambda: alice.post(path, item, format="json"))
        assert status in (400, 404)


def test_the_caps_and_a_full_queue_are_refused_alike(world, routes, settings):
    alice = world.client("alice")
    world.queues["own"].max_item_bytes = 100
    world.queues["own"].max_pending = 1
    world.queues["own"].save()
    status, _, body = same(routes, lambda: alice.post(TASKS, {"s": "x" * 200}, format="json"))
    assert (status, orjson.loads(body)["code"]) == (413, "payload_too_large")
    alice.post(TASKS, {"n": 1}, format="json")
    status, headers, _ = same(routes, lambda: alice.post(TASKS, {"n": 2}, format="json"))
    assert status == 429 and "Retry-After" in dict(headers)
    settings.TASKHOSTER_MAX_BODY_BYTES = 50
    status, _, body = same(routes, lambda: alice.post(TASKS, {"s": "x" * 80}, format="json"))
    assert (status, orjson.loads(body)["code"]) == (413, "payload_too_large")


@pytest.mark.parametrize(
    "authorization",
    ["Bearer th_wrong", "Token abc", "Bearer", "Bearer a b", "Bearer \u00e9"],
)
def test_a_bad_token_is_refused_alike(world, routes, authorization):
    caller = world.client("nobody")
    caller.credentials(HTTP_AUTHORIZATION=authorization)
    status, headers, body = same(routes, lambda: caller.post(TASKS, {"n": 1}, format="json"))
    assert (status, orjson.loads(body)["code"]) == (401, "not_authenticated")
    assert ("WWW-Authenticate", 'Bearer realm="api"') in headers


@pytest.mark.parametrize("place", [MISSING, OTHER_QUEUE, ("BAD..host", QUEUE)])
def test_a_queue_not_the_callers_is_refused_alike(world, routes, place):
    alice = world.client("alice")
    for path in (url(*place), url(*place, "claim"), url(*place, "tasks/0123456789abcdef/fail")):
        status, _, body = same(routes, lambda: alice.post(path, {"n": 1}, format="json"))
        assert (status, orjson.loads(body)["code"]) == (404, "not_found")


def test_a_role_short_of_the_endpoints_is_refused_alike(world, routes):
    bob, alice = world.client("bob"), world.client("alice")
    status, _, body = same(routes, lambda: bob.post(TASKS, {"n": 1}, format="json"))
    assert (status, orjson.loads(body)["code"]) == (403, "permission_denied")
    status, _, _ = same(routes, lambda: alice.post(CLAIM, {"worker": "w"}, format="json"))
    assert status == 403


def test_a_method_the_endpoint_lacks_is_refused_alike(world, routes):
    """Every method but the hot one goes to the DRF view itself."""
    bob = world.client("bob")
    status, headers, _ = same(routes, lambda: bob.put(CLAIM, {}, format="json"), plain_path=False)
    assert (status, dict(headers)["Allow"]) == (405, "POST, OPTIONS")


def test_a_batch_post_and_its_refusal_naming_an_entry(world, routes):
    alice = world.client("alice")
    batch = {"tasks": [{"item": {"n": 1}}, {"item": {"n": 2}, "priority": 3}]}
    status, _, _ = twins(routes, lambda: alice.post(BATCH, batch, format="json"))
    assert status == 201
    bad = {"tasks": [{"item": {"n": 1}}, {"item": {"n": 2}, "delay": "soon"}]}
    status, _, body = same(routes, lambda: alice.post(BATCH, bad, format="json"))
    assert (status, orjson.loads(body)["index"]) == (400, 1)


def test_a_read_alike_and_a_browser_still_gets_drfs_page(world, routes):
    task = world.post()
    olga = world.client("olga")  # an operator's read stamps nothing: both reads see one task
    status, _, _ = same(routes, lambda: olga.get(url(HOST, QUEUE, f"tasks/{task.id}")))
    assert status == 200
    path = url(HOST, QUEUE, "tasks/0123456789abcdef")
    assert same(routes, lambda: olga.get(path))[0] == 404
    assert through_drf(routes, lambda: olga.get(path, HTTP_ACCEPT="text/html")) == 404


# -- workers --------------------------------------------------------------------------------


def test_a_claim_empty_paused_and_held_back_by_the_rate(world, routes):
    bob = world.client("bob")
    status, headers, body = same(routes, lambda: bob.post(CLAIM, {"worker": "w"}, format="json"))
    assert (status, body) == (204, b"") and "Content-Type" not in dict(headers)
    world.post()
    world.post()
    status, _, _ = twins(routes, lambda: bob.post(CLAIM, {"worker": "w"}, format="json"))
    assert status == 200
    world.post()
    world.post()
    status, _, body = twins(routes, lambda: bob.post(CLAIM, {"worker": "w", "max": 1}, "json"))
    assert status == 200 and len(orjson.loads(body)["tasks"]) == 1
    world.queues["own"].paused = True
    world.queues["own"].save()
    status, headers, _ = same(routes, lambda: bob.post(CLAIM, {"worker": "w"}, format="json"))
    assert (status, dict(headers)["Queue-Paused"]) == (204, "true")
    world.queues["own"].paused = False
    world.queues["own"].rate_count, world.queues["own"].rate_seconds = 1, 3600
    world.queues["own"].save()
    world.post()
    world.post()
    bob.post(CLAIM, {"worker": "w"}, format="json")  # the hour's one token
    status, headers, _ = same(routes, lambda: bob.post(CLAIM, {"worker": "w"}, format="json"))
    assert (status, dict(headers)["Queue-Limited"]) == (204, "rate")
    assert "Retry-After" in dict(headers)


@pytest.mark.parametrize(
    "body",
    [{}, {"worker": 7}, {"worker": "w", "wait": 61}, {"worker": "w", "max": 0}, [1], "x", None],
)
def test_a_claim_with_bad_fields_is_refused_alike(world, routes, body):
    bob = world.client("bob")
    status, _, _ = same(routes, lambda: bob.post(CLAIM, orjson.dumps(body), content_type=JSON))
    assert status == 400


def _report(world, bob, kind: str, extra: dict[str, Any]) -> Any:
    task = world.claim(worker="w")
    body = {"worker": "w", "attempt": task.attempts, **extra}
    return bob.post(url(HOST, QUEUE, f"tasks/{task.id}/{kind}"), body, format="json")


@pytest.mark.parametrize(
    ("kind", "extra", "status"),
    [("progress", {"progress": {"p": 1}}, 200), ("progress", {}, 200),
     ("result", {"result": {"ok": 1}}, 200), ("fail", {"result": {"e": 1}}, 200),
     ("fail", {"retry": True}, 200), ("fail", {"cancelled": True}, 400),
     ("result", {"result": {"ok": 1}, "next": {"max": 2, "lease": 30}}, 200),
     ("fail", {"retry": True, "next": {}}, 200), ("result", {"result": {}, "next": []}, 400)],
)  # fmt: skip
def test_each_report_on_a_held_lease(world, routes, kind, extra, status):
    bob = world.client("bob")
    for _ in range(6):  # two reports, each on a task of its own, and what their next claims
        world.post()
    assert twins(routes, lambda: _report(world, bob, kind, extra))[0] == status


@pytest.mark.parametrize("kind", ["progress", "result", "fail"])
def test_a_report_without_the_lease_and_a_replay(world, routes, kind):
    bob = world.client("bob")
    world.post()
    task = world.claim(worker="w")
    path = url(HOST, QUEUE, f"tasks/{task.id}/{kind}")
    stale = {"worker": "w", "attempt": task.attempts + 1, "result": None}
    status, _, body = same(routes, lambda: bob.post(path, stale, format="json"))
    assert (status, orjson.loads(body)["code"]) == (409, "lease_lost")
    bad = {"worker": "w", "attempt": "one"}
    assert same(routes, lambda: bob.post(path, bad, format="json"))[0] == 400
    if kind != "progress":
        report = {"worker": "w", "attempt": task.attempts, "result": {"ok": 1}}
        bob.post(path, report, format="json")
        status, headers, _ = same(routes, lambda: bob.post(path, report, format="json"))
        assert (status, dict(headers)["Taskhoster-Outcome-Replayed"]) == (200, "true")


def test_a_result_over_the_queues_cap_is_refused_alike(world, routes):
    world.queues["own"].max_item_bytes = 100
    world.queues["own"].save()
    world.post()
    task = world.claim(worker="w")
    path = url(HOST, QUEUE, f"tasks/{task.id}/result")
    big = {"worker": "w", "attempt": task.attempts, "result": {"s": "x" * 200}}
    status, _, body = same(routes, lambda: world.client("bob").post(path, big, format="json"))
    assert (status, orjson.loads(body)["code"]) == (413, "payload_too_large")


def test_a_batch_finish_answers_each_entry_alike(world, routes):
    bob = world.client("bob")

    def finish() -> Any:
        world.post()
        task = world.claim(worker="w")
        outcomes = [
            {"id": task.id, "attempt": task.attempts, "outcome": "result", "result": {"ok": 1}},
            {"id": "0123456789abcdef", "attempt": 1, "outcome": "fail"},
        ]
        return bob.post(FINISH, {"worker": "w", "outcomes": outcomes}, format="json")

    status, _, body = twins(routes, finish)
    assert status == 200 and [o["status"] for o in orjson.loads(body)["outcomes"]] == [200, 404]


def test_a_batch_finish_that_claims_the_next_alike(world, routes):
    bob = world.client("bob")

    def finish() -> Any:
        world.post()
        world.post()
        task = world.claim(worker="w")
        outcomes = [{"id": task.id, "attempt": task.attempts, "outcome": "result", "result": {}}]
        body = {"worker": "w", "outcomes": outcomes, "next": {"max": 1}}
        return bob.post(FINISH, body, format="json")

    status, _, body = twins(routes, finish)
    assert status == 200 and len(orjson.loads(body)["next"]) == 1
    empty = {"worker": "w", "outcomes": []}
    assert same(routes, lambda: bob.post(FINISH, empty, format="json"))[0] == 400


# -- what the plain path leaves to DRF ------------------------------------------------------


def test_a_session_caller_an_accept_or_a_format_go_through_drf(world, routes, django_user_model):
    """No token: DRF's session authentication (with its CSRF check); another Accept or a
    ?format=: DRF's negotiation. Each answers as before, through the DRF view."""
    from rest_framework.test import APIClient

    alice = world.client("alice")
    assert through_drf(routes, lambda: APIClient().post(TASKS, {"n": 1}, format="json")) == 401
    for accept in ("text/html", "", "application/xml"):
        send = lambda: alice.post(TASKS, [1], format="json", HTTP_ACCEPT=accept)  # noqa: E731
        assert through_drf(routes, send) in (400, 406)
    assert through_drf(routes, lambda: alice.post(TASKS + "?format=api", [1], format="json"))
    session = APIClient(enforce_csrf_checks=True)
    session.force_login(django_user_model.objects.get(username="alice"))
    status, _, body = same(
        routes, lambda: session.post(TASKS, {"n": 1}, format="json"), plain_path=False
    )
    assert (status, orjson.loads(body)["code"]) == (403, "permission_denied")  # no CSRF token
    forced = APIClient()
    forced.force_authenticate(django_user_model.objects.get(username="alice"))
    assert through_drf(routes, lambda: forced.post(TASKS, [1], format="json")) == 400


def test_a_view_with_policies_of_its_own_is_refused_when_the_urls_load():
    class Throttled(views.ClaimView):
        throttle_classes = [AnonRateThrottle]

    with pytest.raises(ImproperlyConfigured, match="Throttled has DRF policies of its own"):
        plain.view(Throttled)


def test_the_schema_is_the_drf_views_own(client, routes):
    schema = "/api/v1/schema/?format=json"
    ours = client.get(schema).content
    routes.use(routes.drf)
    assert client.get(schema).content == ours
