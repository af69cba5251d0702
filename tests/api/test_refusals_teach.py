"""Refusals that say what to do: the scheme to use, the role needed, the limit hit (with both
numbers), and one wording for every value out of its range."""

import json

import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
TASKS = url(HOST, QUEUE)
CLAIM = url(HOST, QUEUE, "claim")


def refusal(r):
    return r.status_code, r.json()["code"], r.json()["detail"]


@pytest.mark.parametrize("scheme", ["Token", "token", "JWT", "Api-Key"])
def test_a_token_sent_with_another_scheme_is_told_to_use_bearer(world, scheme):
    client = world.client("anonymous")
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {world.tokens['alice']}")
    status, code, detail = refusal(client.post(TASKS, {"n": 1}, format="json"))
    assert (status, code) == (401, "not_authenticated")
    assert detail == (
        "The Authorization header must be 'Bearer <token>'; "
        f"the {scheme} scheme is not one taskhoster takes."
    )
    assert world.tokens["alice"] not in detail


def test_a_bare_token_is_told_to_add_the_scheme_without_echoing_it(world):
    client = world.client("anonymous")
    client.credentials(HTTP_AUTHORIZATION=world.tokens["alice"])
    status, code, detail = refusal(client.get(TASKS))
    assert (status, code) == (401, "not_authenticated")
    assert detail == (
        "The Authorization header must be 'Bearer <token>': the word Bearer, a space, then "
        "the token."
    )


def test_a_token_with_another_scheme_on_a_public_queue_is_not_an_anonymous_post(world):
    world.queues["own"].public_post = True
    world.queues["own"].save()
    client = world.client("anonymous")
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.tokens['alice']}")
    before = world.written()
    assert client.post(TASKS, {"n": 1}, format="json").status_code == 401
    assert world.written() == before  # nothing was posted


def test_no_credentials_says_how_to_send_a_token(world):
    status, code, detail = refusal(world.client("anonymous").get(TASKS))
    assert (status, code) == (401, "not_authenticated")
    assert "Authorization: Bearer <token>" in detail and "createtoken" in detail


def test_a_producer_claiming_is_told_the_worker_role_is_needed(world):
    r = world.client("alice").post(CLAIM, {"worker": "box-1"}, format="json")
    assert refusal(r) == (
        403,
        "permission_denied",
        f"This needs the worker role on {HOST}/{QUEUE}; your roles there: producer.",
    )


def test_a_producer_following_the_whole_queue_is_told_about_operators_and_task(world):
    from rest_framework.test import APIRequestFactory

    from queues.api.events import EventStreamView

    request = APIRequestFactory().get(
        "/events", HTTP_AUTHORIZATION=f"Bearer {world.tokens['alice']}"
    )
    response = EventStreamView.as_view()(request, host=HOST, queue=QUEUE)
    response.render()
    body = json.loads(response.content)
    assert (response.status_code, body["code"], body["detail"]) == (
        403,
        "permission_denied",
        f"This needs the operator role on {HOST}/{QUEUE}; your roles there: producer. "
        "A producer may follow one of its own tasks (?task=ID).",
    )


def test_no_role_at_all_is_still_the_missing_queues_404(world):
    r = world.client("mallory").post(CLAIM, {"worker": "box-1"}, format="json")
    assert (r.status_code, r.json()["code"]) == (404, "not_found")


def test_an_item_over_the_queues_cap_names_the_cap_and_both_sizes(world):
    world.queues["own"].max_item_bytes = 100
    world.queues["own"].save()
    r = world.client("alice").post(TASKS, {"a": "x" * 200}, format="json")
    assert refusal(r) == (
        413,
        "payload_too_large",
        "The item is 208 bytes, over this queue's cap of 100 bytes (its maxItemBytes).",
    )


def test_a_body_over_the_servers_cap_names_that_cap_and_both_sizes(world, settings):
    settings.TASKHOSTER_MAX_BODY_BYTES = 1000
    body = b'{"a": "' + b"x" * 2000 + b'"}'
    r = world.client("alice").post(TASKS, body, content_type="application/json")
    assert refusal(r) == (
        413,
        "payload_too_large",
        "The request body is 2009 bytes, over this server's cap of 1000 bytes on any request "
        "body (TASKHOSTER_MAX_BODY_BYTES).",
    )


@pytest.mark.parametrize(
    ("where", "value", "detail"),
    [
        ("delay", "-1", "delay must be an integer from 0 to 86400 seconds (got -1)."),
        ("delay", "1.5", 'delay must be an integer from 0 to 86400 seconds (got "1.5").'),
        ("delay", "86401", "delay must be an integer from 0 to 86400 seconds (got 86401)."),
        ("priority", "101", "priority must be an integer from -100 to 100 (got 101)."),
        ("priority", "high", 'priority must be an integer from -100 to 100 (got "high").'),
    ],
)
def test_post_range_refusals_share_one_wording(world, where, value, detail):
    r = world.client("alice").post(f"{TASKS}?{where}={value}", {"n": 1}, format="json")
    assert refusal(r) == (400, "invalid_request", detail)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"wait": 61}, "wait must be a number from 0 to 60 seconds (got 61)."),
        ({"wait": "5"}, 'wait must be a number from 0 to 60 seconds (got "5").'),
        ({"lease": 0}, "lease must be an integer from 1 to 86400 seconds (got 0)."),
        ({"lease": 2.5}, "lease must be an integer from 1 to 86400 seconds (got 2.5)."),
        ({"max": 101}, "max must be an integer from 1 to 100 (got 101)."),
        ({"max": True}, "max must be an integer from 1 to 100 (got true)."),
    ],
)
def test_claim_range_refusals_share_one_wording(world, body, detail):
    r = world.client("bob").post(CLAIM, {"worker": "box-1", **body}, format="json")
    assert refusal(r) == (400, "invalid_request", detail)


def test_a_waiting_reads_range_refusal_shares_the_wording(world):
    task = world.post()
    r = world.client("alice").get(f"{TASKS}/{task.id}?wait=90")
    assert refusal(r) == (
        400,
        "invalid_request",
        "wait must be a number from 0 to 60 seconds (got 90).",
    )


def test_a_limit_that_is_not_a_number_says_what_it_got(world):
    r = world.client("alice").get(f"{TASKS}?limit=all")
    assert refusal(r) == (400, "invalid_request", 'limit must be an integer (got "all").')


def test_djangos_own_body_cap_is_named_with_both_numbers(settings):
    """Django refuses a form body over DATA_UPLOAD_MAX_MEMORY_SIZE with RequestDataTooBig; the
    API's handler names that cap (the API itself reads JSON under its own cap, above)."""
    from django.core.exceptions import RequestDataTooBig
    from rest_framework.test import APIRequestFactory

    from queues.api.errors import exception_handler

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    form = "application/x-www-form-urlencoded"
    request = APIRequestFactory().post(TASKS, "a=" + "x" * 3000, content_type=form)
    response = exception_handler(RequestDataTooBig("too big"), {"request": request})
    assert (response.status_code, response.data) == (413, {
        "code": "payload_too_large",
        "detail": "The request body is 3002 bytes, over this server's cap of 1000 bytes on any "
        "request body (DATA_UPLOAD_MAX_MEMORY_SIZE).",
    })  # fmt: skip
