"""The hot endpoints as plain Django views: each DRF view's own handler, without DRF's dispatch.

A worker's claim or result pays DRF's dispatch on every request: its Request, negotiation,
each authenticator in turn, the permission and throttle checks, finalize_response and the
template-response rendering. For the requests whose answer DRF would render as JSON for a
bearer token, `view()` takes the same steps itself, with the same pieces (the bearer
authenticator, the JSON parser, the view's handler, the one exception handler, the renderer)
and nothing else. Every other request (another method, an Accept or ?format= naming another
renderer, a session or anonymous caller, a chunked body) goes to the DRF view unchanged, so
there is one implementation of each endpoint, and the schema is still drf-spectacular's.
"""

from collections.abc import Callable
from functools import cached_property
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.utils.cache import patch_vary_headers
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import (
    AuthenticationFailed,
    NotAuthenticated,
    UnsupportedMediaType,
)
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from queues.api.authentication import BearerAuthentication
from queues.api.errors import exception_handler
from queues.api.negotiation import JSON, JsonFirstNegotiation, answers_json
from queues.api.parsers import JSONRenderer


class PlainRequest:
    """What the API's handlers read of DRF's Request, over Django's own request: the caller,
    the query parameters, and the body, parsed and refused as DRF's Request does (a chunked
    one by queues.api.parsers.chunked_body, with these parsers)."""

    def __init__(self, request: HttpRequest, parsers: list[Any], user: Any, auth: Any) -> None:
        self._request = request
        self.parsers = parsers
        self.negotiator = NEGOTIATION
        # Unlike DRF's Request, this leaves Django's request.user alone: nothing after the
        # view reads it on an API path, and the session behind it is never opened.
        self.user, self.auth = user, auth

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)  # META, headers, method, path, as DRF's Request

    @property
    def query_params(self) -> Any:
        return self._request.GET

    @property
    def content_type(self) -> str:
        return str(self._request.META.get("CONTENT_TYPE", ""))

    @cached_property
    def data(self) -> Any:
        """The body as DRF's Request.data reads one (queues.api.inputs has refused a missing
        body already): 415 for a media type no parser takes, else the parser's reading of the
        body streamed (never `request.body`, which would apply Django's form-body cap instead
        of the API's own)."""
        media_type = self.content_type
        parser = self.negotiator.select_parser(self, self.parsers)
        if parser is None:
            raise UnsupportedMediaType(media_type)
        return parser.parse(self._request, media_type, {"request": self})


NEGOTIATION = JsonFirstNegotiation()


def view(cls: type[APIView], method: str = "post") -> Callable[..., HttpResponseBase]:
    """The URL callback for `cls`: its `method` handler called directly for a request that
    DRF would answer in JSON to a bearer token, `cls.as_view()` for any other request."""
    _check_policies(cls)
    drf = cls.as_view()
    wanted = method.upper()
    authenticator = cls.authentication_classes[0]()
    parsers = [parser() for parser in cls.parser_classes]
    finish = _Finish(cls)

    def plain(request: HttpRequest, **kwargs: Any) -> HttpResponseBase:
        if request.method != wanted or not _json_for_a_token(request):
            return drf(request, **kwargs)
        try:
            found = authenticator.authenticate(request)
        except Exception as exc:  # a refused token, or the token's database unreachable
            return finish(_refusal(exc, authenticator, request, kwargs))
        if found is None:  # no token: a session or an anonymous caller, DRF's to serve
            return drf(request, **kwargs)
        plain_request = PlainRequest(request, parsers, *found)
        try:
            answer = getattr(cls(), method)(plain_request, **kwargs)
        except Exception as exc:
            answer = _refusal(exc, authenticator, plain_request, kwargs)
        return finish(answer)

    exempt: Any = csrf_exempt(plain)  # as DRF's as_view: a bearer token needs no CSRF token
    # What drf-spectacular (and DRF's own schema generator) read from a URL's callback: the
    # API view it serves, so the schema is the one the DRF view gives.
    exempt.cls, exempt.initkwargs = cls, {}
    return exempt


def _json_for_a_token(request: HttpRequest) -> bool:
    """The requests the plain path answers exactly as DRF would: JSON chosen at once, and no
    credentials forced by DRF's test client (they replace the authenticators there)."""
    return (
        answers_json(request.META, NEGOTIATION.settings.URL_FORMAT_OVERRIDE)
        and getattr(request, "_force_auth_user", None) is None
        and getattr(request, "_force_auth_token", None) is None
    )


def _refusal(
    exc: Exception, authenticator: Any, request: Any, kwargs: dict[str, Any]
) -> Response | None:
    """What DRF's handle_exception answers: a 401 names the bearer scheme, then the API's one
    exception handler."""
    if isinstance(exc, NotAuthenticated | AuthenticationFailed):
        exc.auth_header = authenticator.authenticate_header(request)  # type: ignore[union-attr]
    return exception_handler(exc, {"view": None, "args": (), "kwargs": kwargs, "request": request})


class _Finish:
    """DRF's finalize_response and rendering of an API view's Response, as a plain
    HttpResponse: the same status, body bytes and headers, in the same order."""

    def __init__(self, cls: type[APIView]) -> None:
        shown = cls()
        shown.setup(None)  # as dispatch does: a view with GET answers HEAD, and Allow says so
        self.allow = ", ".join(shown.allowed_methods)
        self.vary = len(cls.renderer_classes) > 1
        self.renderer = cls.renderer_classes[0]()

    def __call__(self, answer: Response) -> HttpResponse:
        body = self.renderer.render(answer.data)
        response = HttpResponse(body, status=answer.status_code, content_type=JSON)
        for name, value in answer.items():
            if name != "Content-Type":
                response[name] = value
        if not body:  # DRF's Response drops the type of an empty body (a 204)
            del response["Content-Type"]
        if self.vary:
            patch_vary_headers(response, ["Accept"])
        response["Allow"] = self.allow
        return response


def _check_policies(cls: type[APIView]) -> None:
    """Refuse a view whose DRF policies the plain path would not apply as DRF does: it
    authenticates with the bearer token alone, lets any caller reach the handler (roles are
    queues.api.context's), throttles nothing and renders JSON first."""
    same = (
        list(cls.authentication_classes[:1]) == [BearerAuthentication]
        and list(cls.permission_classes) == [AllowAny]
        and not cls.throttle_classes
        and cls.versioning_class is None
        and cls.content_negotiation_class is JsonFirstNegotiation
        and list(cls.renderer_classes[:1]) == [JSONRenderer]
    )
    if not same:
        raise ImproperlyConfigured(
            f"{cls.__name__} has DRF policies of its own that queues.api.plain does not apply: "
            "route it to its as_view() instead."
        )
