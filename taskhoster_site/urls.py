"""The site's URLs: the admin, the console, the API."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.storage import staticfiles_storage
from django.urls import include, path
from django.views.generic import RedirectView

from queues.metrics.views import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    # The console's own login: the admin's refuses anyone who is not staff, and an operator of
    # a queue need not be.
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("logs/", include("tasklogs.urls")),
    path("metrics", metrics, name="metrics"),
    # Browsers ask for it on every page that names no icon (the admin, the API's pages).
    path(
        "favicon.ico",
        RedirectView.as_view(url=staticfiles_storage.url("console/favicon.svg"), permanent=True),
    ),
    path("", include("queues.urls")),
]

# A bug outside the API's views (a middleware, a plain Django view under /api/) still answers
# api.md's JSON 500 there; the console keeps Django's page.
handler500 = "queues.api.errors.server_error"
