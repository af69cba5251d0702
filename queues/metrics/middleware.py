"""Times every request by its URL route name, and starts the web process's other counts
(flushes, threads held waiting) when Django builds its middleware."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponseBase

from queues.api import held_threads

from . import server

UNMATCHED = "unmatched"  # no route: static files, a 404 outside the API


class RequestFigures:
    """First in MIDDLEWARE, so that a request's time includes the other middleware's."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        if not settings.TASKHOSTER_SERVER_METRICS:
            raise MiddlewareNotUsed
        self.get_response = get_response
        server.watch_flushes()
        held_threads.watch(server.observe_waiting)
        server.observe_waiting(*held_threads.held())  # zeros from the start, not no series

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        took = server.timed()
        response = self.get_response(request)
        # the route's name, never its path: a path holds task ids, a bounded label may not
        match = request.resolver_match
        route = (match.view_name or UNMATCHED) if match is not None else UNMATCHED
        server.observe_request(route, request.method or "", response.status_code, took())
        return response
