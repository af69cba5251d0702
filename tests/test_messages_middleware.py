"""queues.web.messages_middleware: Django's messages, the storage built only when used."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.messages import get_messages
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.utils.functional import empty

from queues.web.messages_middleware import LazyMessageMiddleware

COOKIE = "messages"  # CookieStorage's cookie, where FallbackStorage puts short messages first


def _run(view: Callable[[HttpRequest], None], cookies: dict[str, str] | None = None):
    request = RequestFactory().get("/")
    request.COOKIES.update(cookies or {})

    def respond(req: HttpRequest) -> HttpResponse:
        view(req)
        return HttpResponse("ok")

    chain = SessionMiddleware(LazyMessageMiddleware(respond))
    return request, chain(request)


def test_a_request_that_never_uses_messages_builds_no_storage_and_sets_no_cookie():
    request, response = _run(lambda req: None)
    assert request._messages._wrapped is empty
    assert COOKIE not in response.cookies


def test_a_message_added_in_one_request_is_shown_by_the_next_then_cleared():
    _, first = _run(lambda req: messages.success(req, "queue paused"))
    assert COOKIE in first.cookies  # stored on the way out, as the stock middleware does
    shown: list[str] = []
    _, second = _run(
        lambda req: shown.extend(str(m) for m in get_messages(req)),
        cookies={COOKIE: first.cookies[COOKIE].value},
    )
    assert shown == ["queue paused"]
    assert second.cookies[COOKIE]["max-age"] == 0  # read, so the cookie is deleted


def test_messages_read_but_none_there_leave_no_cookie():
    shown: list[str] = []
    request, response = _run(lambda req: shown.extend(str(m) for m in get_messages(req)))
    assert shown == []
    assert request._messages._wrapped is not empty
    assert COOKIE not in response.cookies
