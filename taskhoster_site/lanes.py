"""Two middleware chains in one WSGI application: a bearer token's API request goes through
the middleware it uses, every other request through the whole of settings.MIDDLEWARE.

Sessions, CSRF, the logged-in user, messages, the login lockout and static files serve the
console's people. An API request that carries `Authorization: Bearer ...` never reaches them:
the bearer authenticator answers it (its user, or a 401) before DRF would look at a session,
API views are CSRF-exempt, and none of them reads a message or serves a file. It pays for them
anyway, on every request, in a chain of a dozen calls; here it skips them and keeps the rest:
the request figures, the security headers, the Content-Security-Policy, CommonMiddleware's
Content-Length and X-Frame-Options, so its answer is byte for byte the same
(tests/api/test_lanes.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from rest_framework.settings import api_settings

from queues.api.negotiation import answers_json

QUEUES_PREFIX = "/api/v1/queues/"  # the queues' endpoints: never a page, the docs or the schema
CONSOLE_ONLY = frozenset(
    {
        "whitenoise.middleware.WhiteNoiseMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "queues.web.messages_middleware.LazyMessageMiddleware",
        "axes.middleware.AxesMiddleware",
    }
)
_loading = threading.Lock()


def api_middleware(middleware: Iterable[str]) -> list[str]:
    """settings.MIDDLEWARE without what only the console uses, in the same order."""
    return [path for path in middleware if path not in CONSOLE_ONLY]


def takes_the_api_lane(environ: dict[str, Any]) -> bool:
    """A queue endpoint's request with a bearer token (valid or not: the authenticator refuses
    a bad one before any session is read), answered in JSON: a browsable page would put a CSRF
    token in its form, and CSRF's middleware would set its cookie."""
    if not str(environ.get("PATH_INFO", "")).startswith(QUEUES_PREFIX):
        return False
    scheme = str(environ.get("HTTP_AUTHORIZATION", "")).split(maxsplit=1)[:1]
    if not scheme or scheme[0].lower() != "bearer":
        return False
    return answers_json(environ, api_settings.URL_FORMAT_OVERRIDE)


class ApiHandler(WSGIHandler):
    """Django's WSGI handler over api_middleware(settings.MIDDLEWARE)."""

    def load_middleware(self, is_async: bool = False) -> None:
        # Django builds the chain from settings.MIDDLEWARE alone: it is swapped for the
        # build (once, at start-up) and put back.
        with _loading:
            full = settings.MIDDLEWARE
            settings.MIDDLEWARE = api_middleware(full)
            try:
                super().load_middleware(is_async)
            finally:
                settings.MIDDLEWARE = full


class Lanes:
    """The site's WSGI application: the API lane or the whole site, per request."""

    def __init__(self) -> None:
        self.site = WSGIHandler()
        self.api = ApiHandler()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        handler = self.api if takes_the_api_lane(environ) else self.site
        return handler(environ, start_response)
