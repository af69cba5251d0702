"""Content negotiation with a shortcut for what API clients send.

DRF's negotiation parses the Accept header and the query string on every request, and reading
the header builds `request.headers` from the whole WSGI environment: together about a tenth of
a claim's time in the server. Nearly every API call says `Accept: application/json`, `*/*` or
nothing, with no `?format=`; for those DRF's answer is always the first renderer when that one
is JSON, so it is given at once. Anything else goes through DRF unchanged. The hot endpoints'
plain views (queues.api.plain) take only the requests this shortcut answers.
"""

from collections.abc import Mapping
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

JSON = "application/json"
# Accept values whose negotiation answers the first renderer's own media type, when that is
# JSON. (An empty Accept is not one: DRF finds no media type in it and answers 406.)
PLAIN_ACCEPTS = frozenset({None, "*/*", JSON})


def answers_json(meta: Mapping[str, Any], format_override: str | None) -> bool:
    """Whether DRF's negotiation answers a view whose first renderer is JSON with that one,
    read from the WSGI environment alone: a plain Accept and no query string that could hold
    the `format_override` parameter (percent-encoded or not)."""
    if meta.get("HTTP_ACCEPT") not in PLAIN_ACCEPTS:
        return False
    query = meta.get("QUERY_STRING", "")
    return not (
        query and format_override is not None and (format_override in query or "%" in query)
    )


class JsonFirstNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: Any = None
    ) -> tuple[BaseRenderer, str]:
        if (
            not format_suffix
            and renderers
            and renderers[0].media_type == JSON
            and answers_json(request.META, self.settings.URL_FORMAT_OVERRIDE)
        ):
            return renderers[0], JSON
        return super().select_renderer(request, renderers, format_suffix)
