"""Where Django's Tasks API lives: `django.tasks` from Django 6, the `django-tasks` package before.

The one place that knows; everything else imports from here.
"""

# ruff: noqa: F401
try:
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
except ImportError:  # Django 5.2: the backport package
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
