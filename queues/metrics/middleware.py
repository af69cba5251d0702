"""Times every request by its URL route name, and starts the web process's other counts
(flushes, threads held waiting) when Django builds its middleware; with OpenTelemetry, the
span of each queue operation of the API (tracing.py)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponseBase

from queues.api import held_threads

from . import server, tracing

UNMATCHED = "unmatched"  # no route: static files, a 404 outside the API


class RequestFigures:
    """First in MIDDLEWARE, so that a request's time includes the other middleware's."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.counting = settings.TASKHOSTER_SERVER_METRICS
        self.tracing = tracing.configure()  # when OpenTelemetry is installed
        if not (self.counting or self.tracing):
            raise MiddlewareNotUsed
        self.get_response = get_response
        if self.counting:
            server.write_every(settings.TASKHOSTER_METRICS_WRITE_SECONDS)
            server.watch_flushes()
            held_threads.watch(server.observe_waiting)
            server.observe_waiting(*held_threads.held())  # zeros from the start, not no series

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        took = server.timed()
        response = self.get_response(request)
        if self.tracing:
            tracing.end_request_span(request, response.status_code)
        if self.counting:
            # the route's name, never its path: a path holds task ids, a bounded label may not
            match = request.resolver_match
            route = (match.view_name or UNMATCHED) if match is not None else UNMATCHED
            server.observe_request(route, request.method or "", response.status_code, took())
        return response

    def process_view(self, request: HttpRequest, view: object, args: object,
                     kwargs: dict[str, object]) -> None:  # fmt: skip
        """The span of a queue operation starts once the route is known (before the view)."""
        if self.tracing and request.resolver_match is not None:
            tracing.start_request_span(request, request.resolver_match.view_name, kwargs)
