"""Task Logs, mounted under /logs/ by the site's URLs."""

from django.urls import path

from . import views

app_name = "tasklogs"

# Names are plain path segments here and checked against the store's rules in the query layer,
# so `..`, `%2F`, `%00` or upper case all end in the same 404 as an unknown task.
urlpatterns = [
    path("", views.event_list, name="events"),
    path("<str:host>/<str:queue>/<str:task_id>/", views.task_timeline, name="task"),
    path("<str:host>/<str:queue>/<str:task_id>/payloads/<str:kind>", views.payload, name="payload"),
    # a result or error body of one event: its attempt and its event name, as the line has them
    path(
        "<str:host>/<str:queue>/<str:task_id>/payloads/<str:kind>/<int:attempt>/<str:event>",
        views.payload,
        name="event-payload",
    ),
    # the same two, as a page that says what they are (the links open these)
    path(
        "<str:host>/<str:queue>/<str:task_id>/payloads/<str:kind>/view",
        views.payload_page,
        name="payload-page",
    ),
    path(
        "<str:host>/<str:queue>/<str:task_id>/payloads/<str:kind>/<int:attempt>/<str:event>/view",
        views.payload_page,
        name="event-payload-page",
    ),
]
