"""Bearer tokens for programs, sessions (with CSRF) for people using the browsable API."""

import re
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from rest_framework import HTTP_HEADER_ENCODING
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from queues.api import memo
from queues.auth.tokens import find_token, hash_token
from queues.models import ApiToken

# What a caller without credentials is told (401), whatever it asked for.
NO_CREDENTIALS = (
    "This needs an API token: send the header 'Authorization: Bearer <token>' "
    "(an administrator creates tokens in the admin or with manage.py createtoken)."
)
BEARER_ONLY = "The Authorization header must be 'Bearer <token>'"
# A scheme name worth repeating back; anything else may be the token itself.
_SCHEME = re.compile(rb"[A-Za-z][A-Za-z0-9-]{0,19}")


class BearerAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>`. Only the header counts: a token in the query string
    would end up in access logs and browser history, so it is never looked at.

    Another scheme (`Token ...`, `JWT ...`, a bare token) is refused with a 401 that says how
    to send it, rather than treating the caller as anonymous. `Basic` is left alone: a proxy
    in front of the site may use it for itself."""

    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, ApiToken] | None:
        parts = _authorization_header(request).split()
        if not parts or parts[0].lower() == b"basic":
            return None  # no credentials of ours: maybe a session, maybe a public post
        if parts[0].lower() != self.keyword:
            raise AuthenticationFailed(_wrong_scheme(parts))
        if len(parts) != 2:
            raise AuthenticationFailed(f"{BEARER_ONLY}: the word Bearer, a space, then the token.")
        try:
            token = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed("The token is not valid.") from None
        record = _usable_token(token)
        if record is None:  # unknown, revoked, expired, or its user deactivated
            raise AuthenticationFailed("The token is not valid.")
        return record.user, record

    def authenticate_header(self, request: Any) -> str:
        # Its presence makes DRF answer 401 (not 403) when credentials are missing or wrong.
        return 'Bearer realm="api"'


def _authorization_header(request: Request) -> bytes:
    """The Authorization header as bytes, as DRF's get_authorization_header gives it, read
    straight from the WSGI environment: DRF goes through `request.headers`, which builds a
    mapping of every header on each request only to read this one."""
    value = request.META.get("HTTP_AUTHORIZATION", b"")
    return value.encode(HTTP_HEADER_ENCODING) if isinstance(value, str) else value


def _wrong_scheme(parts: list[bytes]) -> str:
    scheme = parts[0]
    if len(parts) == 1 or not _SCHEME.fullmatch(scheme):
        return f"{BEARER_ONLY}: the word Bearer, a space, then the token."
    return f"{BEARER_ONLY}; the {scheme.decode()} scheme is not one taskhoster takes."


def _usable_token(token: str) -> ApiToken | None:
    """find_token, memoized by the token's hash for queues.api.memo's bound; expiry is
    checked on every request, so a memoized token still stops working when it expires."""
    key = hash_token(token)
    record = memo.tokens.get(key)
    if record is not None:
        return record if record.is_usable() else None
    record = find_token(token)
    if record is not None:
        memo.tokens.put(key, record)
    return record
