"""gunicorn's access log without the lines that drown the rest: a worker's waiting claims and
long-polling reads, and static files, when they succeeded. A refused or failed one (4xx, 5xx)
is still written, and with gunicorn's `--log-level debug` every request is."""

from __future__ import annotations

import logging
import re
from typing import Any

from gunicorn.glogging import Logger

# POST .../claim, and GET .../tasks/ID?wait=... (a read that may wait for a change)
_CLAIM = re.compile(r"/api/v1/queues/[^/]+/[^/]+/claim/?")
_TASK = re.compile(r"/api/v1/queues/[^/]+/[^/]+/tasks/[^/]+/?")
STATIC_PREFIX = "/static/"


def routine(method: str, path: str, query: str, status: int) -> bool:
    """A request whose line would only repeat what a working system does all day."""
    if status >= 400:
        return False
    if path.startswith(STATIC_PREFIX):
        return True
    if method == "POST" and _CLAIM.fullmatch(path):
        return True
    return method == "GET" and "wait=" in query and _TASK.fullmatch(path) is not None


class QuietAccessLogger(Logger):
    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        status = resp.status
        code = int(str(status).split(None, 1)[0]) if status else 0
        if self.loglevel > logging.DEBUG and routine(
            environ.get("REQUEST_METHOD", ""),
            environ.get("PATH_INFO", ""),
            environ.get("QUERY_STRING", ""),
            code,
        ):
            return
        super().access(resp, req, environ, request_time)
