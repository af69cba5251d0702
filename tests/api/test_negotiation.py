"""queues.api.negotiation's shortcut answers exactly what DRF's negotiation answers."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from queues.api.negotiation import JsonFirstNegotiation
from queues.api.parsers import JSONRenderer

from .conftest import HOST, QUEUE, url

ACCEPTS = [
    None,
    "*/*",
    "application/json",
    "",
    "application/json; indent=4",
    "text/html",
    "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "application/xml",
    "application/*",
]
QUERIES = ["", "?wait=5", "?format=json", "?format=api", "?%66ormat=api", "?format=xml"]


def _request(accept: str | None, query: str) -> Request:
    extra = {} if accept is None else {"HTTP_ACCEPT": accept}
    return Request(APIRequestFactory().get("/api/v1/" + query, **extra))


def _answer(negotiation: DefaultContentNegotiation, request: Request, renderers: list) -> object:
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers)
    except Exception as exc:  # the refusal itself is part of the answer compared
        return type(exc)
    return type(renderer), media_type


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("browsable_first", [False, True])
def test_every_accept_and_query_gets_drfs_own_answer(accept, query, browsable_first):
    renderers = [JSONRenderer(), BrowsableAPIRenderer()]
    if browsable_first:  # a view whose first renderer is not JSON never takes the shortcut
        renderers.reverse()
    ours = _answer(JsonFirstNegotiation(), _request(accept, query), renderers)
    drfs = _answer(DefaultContentNegotiation(), _request(accept, query), renderers)
    assert ours == drfs


def test_a_plain_json_request_is_answered_without_building_the_header_mapping():
    request = _request("application/json", "")
    renderer, media_type = JsonFirstNegotiation().select_renderer(
        request, [JSONRenderer(), BrowsableAPIRenderer()]
    )
    assert (type(renderer), media_type) == (JSONRenderer, "application/json")
    assert "headers" not in request._request.__dict__  # DRF's path builds request.headers


def test_an_empty_accept_is_still_refused_through_the_api(world):
    r = world.client("alice").get(url(HOST, QUEUE), HTTP_ACCEPT="")
    assert (r.status_code, r.json()["code"]) == (406, "not_acceptable")
    with pytest.raises(NotAcceptable):
        JsonFirstNegotiation().select_renderer(_request("", ""), [JSONRenderer()])


def test_api_answers_are_json_with_or_without_an_accept_header(world):
    for accept in (None, "*/*", "application/json"):
        extra = {} if accept is None else {"HTTP_ACCEPT": accept}
        r = world.client("alice").get(url(HOST, QUEUE), **extra)
        assert (r.status_code, r["Content-Type"]) == (200, "application/json")
