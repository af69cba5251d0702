"""/api/v1/: api.md's endpoints, the OpenAPI schema and its offline docs page."""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from queues.api import events, plain, views

app_name = "api"

QUEUE = "queues/<str:host>/<str:queue>/"
TASK = QUEUE + "tasks/<str:id>"

# The busiest endpoints come first: Django tries the patterns in order on every request, and
# none of these overlap (a `str` segment never holds "/"), so the order changes no answer.
# The hot ones skip DRF's dispatch for a bearer token's JSON request (queues.api.plain).
urlpatterns = [
    path(QUEUE + "claim", plain.view(views.ClaimView), name="claim"),
    path(QUEUE + "tasks", plain.view(views.TasksView), name="tasks"),
    # before TASK: "batch" is no task id, but the pattern would take it for one
    path(QUEUE + "tasks/batch", plain.view(views.PostManyView), name="post-many"),
    path(TASK, plain.view(views.TaskView, "get"), name="task"),
    path(TASK + "/result", plain.view(views.ResultView), name="result"),
    path(QUEUE + "finish", plain.view(views.FinishManyView), name="finish-many"),
    path(TASK + "/fail", plain.view(views.FailView), name="fail"),
    path(TASK + "/progress", plain.view(views.ProgressView), name="progress"),
    path(TASK + "/cancel", views.CancelView.as_view(), name="cancel"),
    path(TASK + "/retry", views.RetryView.as_view(), name="retry"),
    path(TASK + "/hasten", views.HastenView.as_view(), name="hasten"),
    path(QUEUE + "stats", views.StatsView.as_view(), name="stats"),
    path(QUEUE + "groups/<str:group>", views.GroupProgressView.as_view(), name="group"),
    path(QUEUE + "events", events.EventStreamView.as_view(), name="events"),
    path("", views.ApiRoot.as_view(), name="root"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script from its own URL, not inline, so the site's
    # CSP (script-src 'self') holds; the Swagger UI assets come from the sidecar's static files.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="queues:api:schema"), name="docs"),
    re_path(r"^.*$", views.NoSuchPath.as_view(), name="no-such-path"),
]
