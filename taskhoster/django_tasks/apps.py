"""The Django app of taskhoster's django-tasks backend (its worker command)."""

from django.apps import AppConfig


class TaskhosterTasksConfig(AppConfig):
    name = "taskhoster.django_tasks"
    label = "taskhoster_tasks"  # "django_tasks" is the backport package's own label
    verbose_name = "taskhoster tasks"
