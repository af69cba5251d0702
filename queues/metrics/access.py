"""Who may read /metrics: a scraper presenting the metrics token, or a staff session."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest

NO_CREDENTIALS = (
    "The metrics need 'Authorization: Bearer <token>' with the site's "
    "TASKHOSTER_METRICS_TOKEN, or a staff user's session."
)
REFUSED_BEARER = "This token does not open the metrics (it is not TASKHOSTER_METRICS_TOKEN)."
NOT_STAFF = "The metrics are for staff users and for the metrics token."


@dataclass(frozen=True)
class Refusal:
    status: int  # 401 or 403
    code: str  # api.md's error code
    detail: str


def refusal(request: HttpRequest) -> Refusal | None:
    """None when the request may read the metrics; else why not, in api.md's terms."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header:
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Refusal(401, "not_authenticated", NO_CREDENTIALS)
        if not token_matches(token.strip(), settings.TASKHOSTER_METRICS_TOKEN):
            return Refusal(403, "permission_denied", REFUSED_BEARER)
        return None
    user = request.user
    if not user.is_authenticated:
        return Refusal(401, "not_authenticated", NO_CREDENTIALS)
    if not (user.is_active and user.is_staff):
        return Refusal(403, "permission_denied", NOT_STAFF)
    return None


def token_matches(presented: str, expected: str) -> bool:
    """Constant time whatever the lengths: the two are hashed first. No token configured
    matches nothing."""
    if not expected:
        return False
    digest = lambda s: hashlib.sha256(s.encode("utf-8", "surrogateescape")).digest()  # noqa: E731
    return hmac.compare_digest(digest(presented), digest(expected))
