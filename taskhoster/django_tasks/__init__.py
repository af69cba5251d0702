"""A backend for Django's Tasks API that puts `@task` functions in taskhoster queues.

    TASKS = {"default": {
        "BACKEND": "taskhoster.django_tasks.TaskhosterBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"URL": "https://tasks.example.com", "TOKEN": "th_...", "HOST": "ex.com",
                    "QUEUE_NAMES": {"default": "site-default"}},
    }}

and "taskhoster.django_tasks" in INSTALLED_APPS for the `taskhoster_worker` command. docs/django.md
says more. Django 5.2 has the API from the `django-tasks` package; Django 6 has it as
`django.tasks`, which is used when present.
"""

from .backend import TaskhosterBackend

__all__ = ["TaskhosterBackend"]
