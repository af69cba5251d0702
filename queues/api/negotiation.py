"""Content negotiation with a shortcut for what API clients send.

DRF's negotiation parses the Accept header and the query string on every request, and reading
the header builds `request.headers` from the whole WSGI environment: together about a tenth of
a claim's time in the server. Nearly every API call says `Accept: application/json`, `*/*` or
nothing, with no `?format=`; for those DRF's answer is always the first renderer when that one
is JSON, so it is given at once. Anything else goes through DRF unchanged.
"""

from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

JSON = "application/json"
# Accept values whose negotiation answers the first renderer's own media type, when that is
# JSON. (An empty Accept is not one: DRF finds no media type in it and answers 406.)
PLAIN_ACCEPTS = frozenset({None, "*/*", JSON})


class JsonFirstNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: Any = None
    ) -> tuple[BaseRenderer, str]:
        meta = request.META
        if (
            not format_suffix
            and renderers
            and renderers[0].media_type == JSON
            and meta.get("HTTP_ACCEPT") in PLAIN_ACCEPTS
            and not self._may_name_a_format(meta.get("QUERY_STRING", ""))
        ):
            return renderers[0], JSON
        return super().select_renderer(request, renderers, format_suffix)

    def _may_name_a_format(self, query: str) -> bool:
        """Whether the query string could hold DRF's ?format= override (percent-encoded or
        not); most API calls have no query string at all."""
        name = self.settings.URL_FORMAT_OVERRIDE
        return bool(query) and name is not None and (name in query or "%" in query)
