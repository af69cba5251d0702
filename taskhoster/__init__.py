"""taskhoster's Python client: the HTTP API (client.py) and a worker loop (worker.py)."""

from .client import ApiError, Client
from .worker import Cancelled, Fail, Job, Retry, run_worker

__all__ = ["ApiError", "Cancelled", "Client", "Fail", "Job", "Retry", "run_worker"]
