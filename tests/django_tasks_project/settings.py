"""A small Django project that uses the taskhoster backend for Django's Tasks API (live tests)."""

import os

SECRET_KEY = "tests-only"
USE_TZ = True
DATABASES: dict = {}
INSTALLED_APPS = ["django_tasks", "taskhoster.django_tasks"]
TASKS = {
    "default": {
        "BACKEND": "taskhoster.django_tasks.TaskhosterBackend",
        "QUEUES": ["default", "flaky", "fails", "prio", "later", "odd"],
        "OPTIONS": {
            "URL": os.environ["TASKHOSTER_URL"],
            "TOKEN": os.environ["TASKHOSTER_TOKEN"],
            "WORKER_TOKEN": os.environ["TASKHOSTER_WORKER_TOKEN"],
            "HOST": "live.example.com",
            "QUEUE_NAMES": {
                "default": "djdefault",
                "flaky": "djflaky",
                "fails": "djfail",
                "prio": "djprio",
                "later": "djlater",
                "odd": "djodd",
            },
        },
    }
}
