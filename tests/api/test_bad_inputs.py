"""quality.md's bad-input table through the API: the exact refusal, never a 5xx, and nothing
written anywhere (the test's whole tmp dir, items and logs, is compared before and after)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.exceptions import ParseError

from queues.api.parsers import _check_integers
from queues.auth.tokens import revoke_token
from queues.models import ApiToken
from tests.api.conftest import HOST, QUEUE, bearer, url

pytestmark = pytest.mark.django_db
TASKS = url(HOST, QUEUE)


@pytest.fixture
def unchanged(world):
    """Asserts, after the test, that its requests wrote nothing (world.written)."""
    world.store  # opened first: a new store makes its log directory, no request does
    before = world.written()
    yield
    assert world.written() == before


def deep(levels: int) -> bytes:
    """An object whose nesting is `levels` deep: {"a": [[...]]}."""
    return b'{"a":' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"


INVALID_JSON = {
    "10,000 deep": b"[" * 10_000 + b"]" * 10_000,
    "10,000 deep objects": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    "65 deep": deep(65),
    "NaN": b'{"a": NaN}',
    "Infinity": b'{"a": Infinity}',
    "-Infinity": b'{"a": -Infinity}',
    "1e400": b'{"a": 1e400}',
    "-1e400": b'{"a": -1e400}',
    "lone high surrogate": b'{"a": "\\ud800"}',
    "lone low surrogate": b'{"a": "\\udc00x"}',
    "duplicate key": b'{"a": 1, "a": 2}',
    "nested duplicate key": b'{"a": {"b": 1, "c": {"d": 1, "d": 1}}}',
    "duplicate key with tricky strings": b'{"x:\\"": ":", "x:\\"": 1}',
    "invalid UTF-8": b'{"a": "\xff\xfe"}',
    "overlong UTF-8": b'{"a": "\xc0\xaf"}',
    "UTF-8 BOM": b'\xef\xbb\xbf{"a": 1}',
    "UTF-16": '{"a": 1}'.encode("utf-16"),
    "truncated": b'{"a": [1, 2',
    "trailing garbage": b'{"a": 1} x',
    "empty body": b"",
    "whitespace": b"   ",
    "5,000-digit integer": b'{"a": ' + b"9" * 5000 + b"}",
    # orjson would read these as floats: stored, they would no longer be the number posted
    "2**64": b'{"a": 18446744073709551616}',
    "-2**63 - 1": b'{"a": -9223372036854775809}',
    "a 30-digit integer deep in a list": b'{"a": [1, [2, 123456789012345678901234567890]]}',
}


@pytest.mark.parametrize("body", INVALID_JSON.values(), ids=INVALID_JSON.keys())
def test_invalid_json_is_400(world, unchanged, body):
    r = world.client("alice").post(TASKS, body, content_type="application/json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_json"), r.content


@pytest.mark.parametrize("body", [INVALID_JSON["10,000 deep"], INVALID_JSON["duplicate key"]])
def test_invalid_json_in_a_worker_body_is_400(world, body):
    task = world.post()
    world.claim()
    before = world.store.read(HOST, QUEUE, task.id)
    for verb in ("progress", "result", "fail"):
        r = world.client("bob").post(
            f"{TASKS}/{task.id}/{verb}", body, content_type="application/json"
        )
        assert (r.status_code, r.json()["code"]) == (400, "invalid_json")
    r = world.client("bob").post(url(HOST, QUEUE, "claim"), body, content_type="application/json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_json")
    assert world.store.read(HOST, QUEUE, task.id) == before


ACCEPTED = {
    "64 deep": deep(64),
    "colons and quotes inside strings": b'{"a:b": "c:d", "q\\"": "\\":\\"", "e": ["::"]}',
    "same key in sibling objects": b'{"a": [{"k": 1}, {"k": 2}], "b": {"k": 3}}',
    "a surrogate pair": b'{"a": "\\ud83d\\ude00"}',
    "unicode keys": '{"clé": 1, "cle\u0301": 2}'.encode(),
    "empty object": b"{}",
    "the largest and smallest 64-bit integers": b'{"a": 18446744073709551615, '
    b'"b": -9223372036854775808}',
    "a large float written as one": b'{"a": 1e19, "b": 18446744073709551616.0}',
}


@pytest.mark.parametrize("body", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_valid_json_near_the_limits_is_accepted(world, body):
    r = world.client("alice").post(TASKS, body, content_type="application/json")
    assert r.status_code == 201, r.content


@pytest.mark.parametrize("body", [b"[]", b"[1]", b'"text"', b"null", b"7", b"true"])
def test_an_item_that_is_not_an_object_is_invalid_item(world, unchanged, body):
    r = world.client("alice").post(TASKS, body, content_type="application/json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_item")


def test_item_over_the_cap_is_413_naming_the_item(world, unchanged):
    world.queues["own"].max_item_bytes = 100
    world.queues["own"].save()
    r = world.client("alice").post(TASKS, {"a": "x" * 200}, format="json")
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large")
    assert "item" in r.json()["detail"] and "100" in r.json()["detail"]


@pytest.mark.parametrize(
    ("verb", "field"), [("progress", "progress"), ("result", "result"), ("fail", "result")]
)
def test_progress_or_result_over_the_cap_is_413_naming_it(world, verb, field):
    world.queues["own"].max_item_bytes = 100
    world.queues["own"].save()
    task = world.post()
    world.claim()
    before = world.store.read(HOST, QUEUE, task.id)
    body = {"worker": "box-1", "attempt": 1, field: {"a": "x" * 200}}
    r = world.client("bob").post(f"{TASKS}/{task.id}/{verb}", body, format="json")
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large")
    assert field in r.json()["detail"]
    assert world.store.read(HOST, QUEUE, task.id) == before


def test_a_raw_body_over_the_site_cap_is_413_before_it_is_parsed(world, unchanged, settings):
    settings.TASKHOSTER_MAX_BODY_BYTES = 1000
    r = world.client("alice").post(
        TASKS, b'{"a": "' + b"x" * 2000 + b'"}', content_type="application/json"
    )
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large")


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "",
    ],
)
def test_a_body_that_is_not_json_is_415(world, unchanged, content_type):
    r = world.client("alice").generic("POST", TASKS, b'{"a": 1}', content_type=content_type)
    assert (r.status_code, r.json()["code"]) == (415, "unsupported_media_type")


def test_json_with_a_charset_parameter_is_fine(world):
    r = world.client("alice").post(
        TASKS, b'{"a": 1}', content_type="application/json; charset=utf-8"
    )
    assert r.status_code == 201


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("put", "tasks"),
        ("delete", "tasks"),
        ("patch", "tasks/0123456789abcdef"),
        ("delete", "tasks/0123456789abcdef"),
        ("get", "claim"),
        ("get", "tasks/0123456789abcdef/cancel"),
        ("put", "tasks/0123456789abcdef/result"),
    ],
)
def test_a_method_the_endpoint_lacks_is_405(world, unchanged, method, path):
    r = getattr(world.client("alice"), method)(url(HOST, QUEUE, path))
    assert (r.status_code, r.json()["code"]) == (405, "method_not_allowed")


def test_trace_is_405(world):
    r = world.client("alice").generic("TRACE", TASKS)
    assert (r.status_code, r.json()["code"]) == (405, "method_not_allowed")


def tokens_that_fail(world) -> dict[str, str]:
    revoked, expired = ApiToken.objects.filter(user__username__in=["paula", "olga"])
    revoke_token(revoked)
    expired.expires_at = timezone.now() - timedelta(seconds=1)
    expired.save()
    good = world.tokens["alice"]
    return {
        "wrong": good[:-4] + ("aaaa" if not good.endswith("aaaa") else "bbbb"),
        "revoked": world.tokens[revoked.user.username],
        "expired": world.tokens[expired.user.username],
        "garbage": "not-a-token",
        "non-ascii": "th_\u00e9",
    }


@pytest.mark.parametrize("kind", ["wrong", "revoked", "expired", "garbage", "non-ascii"])
def test_a_bad_token_is_401(world, unchanged, kind):
    token = tokens_that_fail(world)[kind]
    client = bearer(token) if kind != "non-ascii" else world.client("anonymous")
    if kind == "non-ascii":
        client.credentials(HTTP_AUTHORIZATION="Bearer th_\u00e9".encode().decode("latin-1"))
    r = client.post(TASKS, {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (401, "not_authenticated")
    assert r["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer a b", "Basic YTpi", "Token abc"])
def test_malformed_authorization_is_401(world, unchanged, header):
    client = world.client("anonymous")
    client.credentials(HTTP_AUTHORIZATION=header)
    r = client.post(TASKS, {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (401, "not_authenticated")


@pytest.mark.parametrize("param", ["token", "access_token", "auth", "bearer"])
def test_a_token_in_the_query_string_is_ignored(world, unchanged, param):
    r = world.client("anonymous").get(f"{TASKS}?{param}={world.tokens['alice']}")
    assert (r.status_code, r.json()["code"]) == (401, "not_authenticated")


def test_too_many_query_parameters_is_400(world):
    query = "&".join(f"p{i}=1" for i in range(1500))
    r = world.client("alice").get(f"{TASKS}?{query}")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")


def test_host_header_not_allowed_is_400(world):
    r = world.client("alice").get(TASKS, HTTP_HOST="evil.example")
    assert r.status_code == 400


def test_a_session_post_without_csrf_is_403(world, unchanged):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.get(username="alice"))
    r = client.post(TASKS, {"n": 1}, format="json")
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")
    assert client.get(TASKS).status_code == 200  # a safe method needs no CSRF token


def test_a_session_post_with_csrf_is_accepted(world):
    from django.contrib.auth import get_user_model
    from django.middleware.csrf import _get_new_csrf_string
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.get(username="alice"))
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    r = client.post(TASKS, {"n": 1}, format="json", HTTP_X_CSRFTOKEN=token)
    assert r.status_code == 201


def test_the_browsable_api_renders_for_a_session(world):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(get_user_model().objects.get(username="olga"))
    r = client.get(TASKS, HTTP_ACCEPT="text/html")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/html")
    r = client.get(url(HOST, QUEUE, "tasks/0123456789abcdef"), HTTP_ACCEPT="text/html")
    assert r.status_code == 404


@pytest.mark.parametrize("content", [b"", b'{"id": "trunc', b"\xff\xfe", b"[]", b'{"id": 1}'])
def test_a_corrupt_task_file_is_404_and_skipped_never_500(world, store_dirs, content):
    world.files_only("a PostgreSQL task is a jsonb row the database checked, never a file "
                     "someone can damage")  # fmt: skip
    task = world.post()
    broken = world.post()
    (store_dirs["items"] / HOST / QUEUE / "pending" / f"{broken.id}.json").write_bytes(content)
    r = world.client("alice").get(f"{TASKS}/{broken.id}")
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    listed = world.client("alice").get(TASKS).json()
    assert [t["id"] for t in listed["results"]] == [task.id]
    r = world.client("bob").post(
        url(HOST, QUEUE, "claim"), {"worker": "w", "max": 5}, format="json"
    )
    assert [t["id"] for t in r.json()["tasks"]] == [task.id]


def test_a_planted_symlink_is_never_followed(world, store_dirs, tmp_path):
    world.files_only("a PostgreSQL queue has no directory to plant a symlink in")
    outside = tmp_path / "outside.json"
    task = world.post()
    outside.write_bytes(
        (store_dirs["items"] / HOST / QUEUE / "pending" / f"{task.id}.json").read_bytes()
    )
    planted = world.post()
    link = store_dirs["items"] / HOST / QUEUE / "pending" / f"{planted.id}.json"
    link.unlink()
    link.symlink_to(outside)
    before = outside.read_bytes()
    r = world.client("alice").get(f"{TASKS}/{planted.id}")
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    r = world.client("alice").post(f"{TASKS}/{planted.id}/cancel")
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    assert outside.read_bytes() == before


@pytest.mark.parametrize("accept", ["application/xml", "text/csv"])
def test_an_accept_header_nothing_satisfies_is_406(world, accept):
    r = world.client("alice").get(TASKS, HTTP_ACCEPT=accept)
    assert (r.status_code, r.json()["code"]) == (406, "not_acceptable")


def test_integers_at_the_64_bit_limits_come_back_exactly(world):
    body = b'{"big": 18446744073709551615, "small": -9223372036854775808}'
    r = world.client("alice").post(TASKS, body, content_type="application/json")
    assert r.status_code == 201, r.content
    task = world.store.read(HOST, QUEUE, r.json()["id"])
    assert task.item == {"big": 2**64 - 1, "small": -(2**63)}


def test_an_integer_beyond_64_bits_is_refused_with_a_reason(world, unchanged):
    body = b'{"n": 18446744073709551616}'
    r = world.client("alice").post(TASKS, body, content_type="application/json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_json")
    assert "64-bit" in r.json()["detail"] and "18446744073709551616" in r.json()["detail"]


def test_the_exact_integer_check_refuses_what_python_cannot_read_either():
    """The second read is Python's parser; a body it cannot read is a 400 there too, not a 500."""
    with pytest.raises(ParseError):
        _check_integers(b'{"a": [1e400, }')
    _check_integers(b'{"a": 18446744073709551615}')  # in range: no refusal
