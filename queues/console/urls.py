"""The console's pages: the dashboard, a queue's page and insight, a task's page and its verbs."""

from django.urls import path, register_converter

from queues.console import views
from queues.console.converters import TaskIdConverter

register_converter(TaskIdConverter, "task_id")

urlpatterns = [
    path("", views.dashboard, name="home"),
    path("console/queues.json", views.dashboard_json, name="dashboard-json"),
    path("console/workers/", views.workers_page, name="workers"),
    path("console/<str:host>/<str:queue>/", views.queue_page, name="queue"),
    path("console/<str:host>/<str:queue>/workers/", views.workers_page, name="queue-workers"),
    path("console/<str:host>/<str:queue>/pause", views.queue_pause, name="queue-pause"),
    path("console/<str:host>/<str:queue>/bulk", views.queue_bulk, name="queue-bulk"),
    path("console/<str:host>/<str:queue>/insight/", views.queue_insight, name="insight"),
    path("console/<str:host>/<str:queue>/<task_id:task_id>/", views.task_page, name="task"),
    path("console/<str:host>/<str:queue>/groups/<str:group>/", views.group_page, name="group"),
    path(
        "console/<str:host>/<str:queue>/<task_id:task_id>/cancel",
        views.task_action,
        {"action": "cancel"},
        name="task-cancel",
    ),
    path(
        "console/<str:host>/<str:queue>/<task_id:task_id>/retry",
        views.task_action,
        {"action": "retry"},
        name="task-retry",
    ),
    path(
        "console/<str:host>/<str:queue>/<task_id:task_id>/requeue",
        views.task_action,
        {"action": "requeue"},
        name="task-requeue",
    ),
    path(
        "console/<str:host>/<str:queue>/<task_id:task_id>/hasten",
        views.task_action,
        {"action": "hasten"},
        name="task-hasten",
    ),
    path(
        "console/<str:host>/<str:queue>/<task_id:task_id>/delete",
        views.task_action,
        {"action": "delete"},
        name="task-delete",
    ),
    path(
        "console/<str:host>/<str:queue>/<task_id:task_id>/edit-retry",
        views.task_edit_retry,
        name="task-edit-retry",
    ),
    path(
        "console/<str:host>/<str:queue>/<task_id:task_id>/repost",
        views.task_repost,
        name="task-repost",
    ),
]
