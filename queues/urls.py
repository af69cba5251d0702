"""The queues app's URLs: the API under api/v1/, the console's pages everywhere else."""

from django.urls import include, path

app_name = "queues"

urlpatterns = [
    path("api/v1/", include("queues.api.urls")),
    path("", include("queues.console.urls")),  # no namespace of its own: names stay "queues:..."
]
