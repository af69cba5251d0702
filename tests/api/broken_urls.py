"""The site's URLs plus two plain Django views that fail the way a bug would, one under /api/ and
one in the console, to reach Django's own last-resort handler (DRF never sees them)."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from taskhoster_site.urls import handler500
from taskhoster_site.urls import urlpatterns as site_urlpatterns


def broken(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug outside the API's views")


urlpatterns = [
    path("api/v1/broken", broken),
    path("console-broken/", broken),
    *site_urlpatterns,
]

__all__ = ["handler500", "urlpatterns"]
