"""gunicorn settings used by `make run` and production (`gunicorn -c gunicorn.conf.py`).

Waiting claims and event streams hold a request open, so the workers are threaded: a
waiting request occupies a thread, not a whole process.
"""

import os

bind = os.environ.get("TASKHOSTER_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("TASKHOSTER_WEB_WORKERS", "2"))
worker_class = "gthread"
threads = int(os.environ.get("TASKHOSTER_WEB_THREADS", "8"))
# A waiting claim lasts at most 60 s; a stream sends a keep-alive every 15 s.
timeout = 90
graceful_timeout = 20
accesslog = "-"
