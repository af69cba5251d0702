"""The site's URLs: the admin, the console, the API."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("logs/", include("tasklogs.urls")),
    path("", include("queues.urls")),
]
