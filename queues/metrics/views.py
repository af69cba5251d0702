"""GET /metrics: the Prometheus text exposition of this scrape's figures, or the refusal."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest

from .access import refusal
from .figures import StoreFigures
from .server import ServerFigures


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    refused = refusal(request)
    if refused is not None:
        response = JsonResponse({"code": refused.code, "detail": refused.detail},
                                status=refused.status)  # fmt: skip
        if refused.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    # The 0.0.4 text format: every Prometheus reads it, and no name here needs 1.0.0's UTF-8.
    # A registry per scrape: only these collectors, no process or platform collectors whose
    # figures would differ from one gunicorn worker to the next (the server's own figures are
    # every worker's, read from their multiprocess files).
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreFigures())
    if settings.TASKHOSTER_SERVER_METRICS:
        registry.register(ServerFigures(settings.VAR_DIR))
    response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)
    response["Cache-Control"] = "no-store"
    return response
