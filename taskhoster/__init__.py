"""taskhoster's Python client: the HTTP API (client.py) and a worker loop (worker.py)."""

from .client import ApiError, ClaimAnswer, Client
from .worker import Cancelled, Fail, Job, Retry, run_worker

__all__ = ["ApiError", "Cancelled", "ClaimAnswer", "Client", "Fail", "Job", "Retry", "run_worker"]
