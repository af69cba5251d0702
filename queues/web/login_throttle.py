"""How a login lockout (django-axes) answers: the login form itself, saying why and until when.

Axes counts failed logins per user name and per address in the database, which every server
process shares; it calls `locked_out` for the attempt that reaches the limit and for each one
during the lockout, the right password included. The form that was posted is shown again
(the console's or the admin's, whichever was used) with the lockout in place of its error.
"""

from __future__ import annotations

from typing import Any

from axes.helpers import get_cool_off
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

LOCKED_STATUS = 429


def lockout_message(request: HttpRequest) -> str:
    cool_off = get_cool_off(request)
    if cool_off is None:  # not ours: the settings give one; said plainly all the same
        return "Too many failed logins for this user or from this address. Ask an admin."
    # Each attempt during the lockout starts it again, so it ends a cool-off after this one.
    until = timezone.now() + cool_off
    minutes = max(round(cool_off.total_seconds() / 60), 1)
    return (
        "Too many failed logins for this user or from this address: logging in is locked for "
        f"{minutes} minute{'s' if minutes != 1 else ''}, until {until:%H:%M} UTC. "
        "Every try before then starts the wait again."
    )


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any = None
) -> HttpResponse:
    message = lockout_message(request)
    context = getattr(original_response, "context_data", None) or {}
    form = context.get("form")
    if not isinstance(original_response, TemplateResponse) or form is None:
        return HttpResponse(message, status=LOCKED_STATUS, content_type="text/plain")
    form._errors = form._errors or {}
    form._errors[NON_FIELD_ERRORS] = form.error_class([message], renderer=form.renderer)
    context["locked_out"] = message
    original_response.content = original_response.rendered_content
    original_response.status_code = LOCKED_STATUS
    return original_response


def forwarded_address(request: HttpRequest) -> str:
    """Behind a proxy (TASKHOSTER_BEHIND_PROXY) the address the proxy saw: the last one of
    X-Forwarded-For, the one it appended; those before it are the client's to make up."""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").rsplit(",", 1)[-1].strip()
    return forwarded or str(request.META.get("REMOTE_ADDR", ""))
