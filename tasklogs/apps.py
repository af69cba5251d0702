"""The Task Logs app's configuration."""

from django.apps import AppConfig


class TasklogsConfig(AppConfig):
    name = "tasklogs"
    verbose_name = "Task logs"
