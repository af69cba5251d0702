"""The one exception handler: every refusal is `{"code", "detail"}` with api.md's status.

Store errors carry their api.md code; DRF's and Django's own refusals are renamed to the same
vocabulary here, so a client reads one shape whatever layer said no.
"""

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from queues.api.authentication import NO_CREDENTIALS
from queues.api.parsers import LengthRequired, body_too_large, content_length, server_cap
from queues.store.errors import InvalidTransition, QueueFull, StorageUnavailable, StoreError

logger = logging.getLogger(__name__)

# The tenant rule: a foreign or missing host, queue or task, or an invalid name, must answer the
# same bytes, so the detail never says which of them it was.
NOT_FOUND_DETAIL = "There is no such host, queue or task, or it is not yours to see."

STORE_STATUS = {
    "not_found": status.HTTP_404_NOT_FOUND,
    "invalid_item": status.HTTP_400_BAD_REQUEST,
    "invalid_request": status.HTTP_400_BAD_REQUEST,
    "lease_lost": status.HTTP_409_CONFLICT,
    "not_cancellable": status.HTTP_409_CONFLICT,
    "not_retryable": status.HTTP_409_CONFLICT,
    "dependency_failed": status.HTTP_409_CONFLICT,
    "not_waiting": status.HTTP_409_CONFLICT,
    "group_closed": status.HTTP_409_CONFLICT,
    "payload_too_large": status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    "idempotency_key_reused": status.HTTP_422_UNPROCESSABLE_ENTITY,
    "queue_full": status.HTTP_429_TOO_MANY_REQUESTS,
    "storage_unavailable": status.HTTP_503_SERVICE_UNAVAILABLE,
    "internal": status.HTTP_500_INTERNAL_SERVER_ERROR,
}
INTERNAL_DETAIL = "The server failed to handle this request; it has been logged."
DATABASE_DOWN_DETAIL = "The database is not reachable; nothing was done, try again."

# DRF's exception classes -> api.md's code (DRF's default codes differ for a few of them).
DRF_CODES: list[tuple[type[exceptions.APIException], str]] = [
    (exceptions.ParseError, "invalid_json"),
    (exceptions.AuthenticationFailed, "not_authenticated"),
    (exceptions.NotAuthenticated, "not_authenticated"),
    (exceptions.PermissionDenied, "permission_denied"),
    (exceptions.NotFound, "not_found"),
    (exceptions.MethodNotAllowed, "method_not_allowed"),
    (exceptions.NotAcceptable, "not_acceptable"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (exceptions.Throttled, "throttled"),
    (exceptions.ValidationError, "invalid_request"),
    (LengthRequired, "length_required"),
]


def refusal_body(exc: StoreError) -> tuple[int, dict[str, Any]]:
    """A store refusal's status and body, `index` included when it names a batch's entry."""
    code = exc.code if exc.code in STORE_STATUS else "internal"
    detail = INTERNAL_DETAIL if code == "internal" else exc.detail
    if code == "not_found":
        detail = NOT_FOUND_DETAIL
    body: dict[str, Any] = {"code": code, "detail": detail}
    if exc.index is not None:
        body["index"] = exc.index
    return STORE_STATUS[code], body


def refusal(code: str, detail: str, status_code: int, **headers: str) -> Response:
    if code == "not_found":
        detail = NOT_FOUND_DETAIL
    response = Response({"code": code, "detail": detail}, status=status_code)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER. Anything not mapped here is a bug: api.md's JSON 500."""
    if isinstance(exc, StoreError):
        return _store_refusal(exc)
    if isinstance(exc, OperationalError | InterfaceError):
        # The console's database went away (a restart, a failover, the network): the token
        # lookup or the queue's settings could not be read, so nothing was done. A 503 the
        # client retries, as for the store's own database, not a 500 page.
        logger.warning("database unreachable: %s", exc)
        return _store_refusal(StorageUnavailable(DATABASE_DOWN_DETAIL))
    if isinstance(exc, RequestDataTooBig):  # Django's own cap on request.body (form bodies)
        size = content_length(context.get("request"))
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        cap = server_cap(limit, "DATA_UPLOAD_MAX_MEMORY_SIZE")
        return _store_refusal(body_too_large(size, limit, cap))
    if isinstance(exc, SuspiciousOperation):  # e.g. more query parameters than Django reads
        return refusal("invalid_request", "The request is malformed.", 400)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return _unexpected(exc, context)
    set_rollback()
    if isinstance(exc, exceptions.NotAuthenticated):
        exc.detail = NO_CREDENTIALS  # one sentence for every missing-credentials refusal
    code = next((c for cls, c in DRF_CODES if isinstance(exc, cls)), "invalid_request")
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW_Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry_After"] = f"{int(exc.wait)}"
    return refusal(code, _sentence(exc.detail), exc.status_code, **headers)


def _unexpected(exc: Exception, context: dict[str, Any]) -> Response:
    """A bug: logged with its traceback (DRF's default would have left that to Django, and
    answered Django's HTML page, which no client of a JSON API can read), and answered with
    api.md's `{"code": "internal"}`. The request's transaction, if any, is undone."""
    set_rollback()
    request = context.get("request")
    logger.error(
        "unexpected error in %s %s",
        getattr(request, "method", "?"),
        getattr(request, "path", "?"),
        exc_info=exc,
    )
    return refusal("internal", INTERNAL_DETAIL, status.HTTP_500_INTERNAL_SERVER_ERROR)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's last word on an exception nothing handled (it has logged it already): JSON with
    api.md's `{"code": "internal"}` under /api/, Django's own page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"code": "internal", "detail": INTERNAL_DETAIL}, status=500)
    return defaults.server_error(request)


def _store_refusal(exc: StoreError) -> Response:
    headers = {}
    if isinstance(exc, QueueFull):
        headers["Retry_After"] = str(exc.retry_after)
    status_code, body = refusal_body(exc)
    if body["code"] == "internal":
        # A bug in the store (a transition its own table refuses): nothing was written, the
        # client cannot fix it, and the operator must hear of it.
        _log_internal(exc)
    response = Response(body, status=status_code)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _log_internal(exc: StoreError) -> None:
    if isinstance(exc, InvalidTransition):
        logger.error(
            "store refused its own transition: task %s from %s to %s with event %s",
            exc.task_id,
            exc.source,
            exc.target,
            exc.event,
            exc_info=exc,
        )
    else:
        logger.error("store internal error: %s", exc.detail, exc_info=exc)


def _sentence(detail: Any) -> str:
    """One human sentence from DRF's detail, which may be a string, a list or a dict."""
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_sentence(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(_sentence(value) for value in detail)
    return str(detail)
