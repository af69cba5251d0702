"""The site's URLs plus POST /bench/noop: bearer-authenticated DRF that parses and answers.

It pays what every API request pays (middleware, token lookup, JSON in and out) and nothing
of the store, so its requests/s is the ceiling a lifecycle's four requests are measured by.
"""

from typing import Any

from django.urls import path
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from queues.api.authentication import BearerAuthentication
from taskhoster_site import urls as site_urls


class Noop(APIView):
    authentication_classes = [BearerAuthentication]
    permission_classes = [IsAuthenticated]

    def post(self, request: Request) -> Response:
        return Response({"ok": True, "keys": len(request.data)})

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


# The site's own patterns spread in, not include()d: an include would put every API request
# one resolver level deeper than in production, a cost the site itself does not pay.
urlpatterns: list[Any] = [path("bench/noop", Noop.as_view()), *site_urls.urlpatterns]
