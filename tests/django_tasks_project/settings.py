"""A small Django project that uses the taskhoster backend for Django's Tasks API (live tests)."""

import os

SECRET_KEY = "tests-only"
USE_TZ = True
DATABASES: dict = {}
INSTALLED_APPS = ["django_tasks", "taskhoster.django_tasks"]
# Django's queue name -> the live server's queue (tests/api_live/live.py creates the dj* ones,
# tests/client/conftest.py the djcw* ones)
QUEUE_NAMES = {
    "default": "djdefault",
    "flaky": "djflaky",
    "fails": "djfail",
    "prio": "djprio",
    "later": "djlater",
    "odd": "djodd",
    "cw": "djcw",
    "cwexit": "djcwexit",
    "cwodd": "djcwodd",
    "cwcap": "djcwcap",
    "cwctx": "djcwctx",
    "cwcancel": "djcwcancel",
}
TASKS = {
    "default": {
        "BACKEND": "taskhoster.django_tasks.TaskhosterBackend",
        "QUEUES": list(QUEUE_NAMES),
        "OPTIONS": {
            "URL": os.environ["TASKHOSTER_URL"],
            "TOKEN": os.environ["TASKHOSTER_TOKEN"],
            "WORKER_TOKEN": os.environ["TASKHOSTER_WORKER_TOKEN"],
            "HOST": "live.example.com",
            "QUEUE_NAMES": QUEUE_NAMES,
        },
    }
}
