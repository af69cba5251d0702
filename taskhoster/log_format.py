"""How `taskhoster work` and `taskhoster_worker` write the worker's log lines: for people, or
as one JSON object per line for log shippers."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

# what a JSON line carries of a record's extras (the worker loop's `extra=`)
FIELDS = ("event", "task", "attempt", "worker", "seconds", "error", "retry_in", "line")
HUMAN_FORMAT = "%(asctime)s %(message)s"
HUMAN_DATES = "%Y-%m-%d %H:%M:%S"


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({name: getattr(record, name) for name in FIELDS if hasattr(record, name)})
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def handler_for(log_format: str, stream: TextIO | None = None) -> logging.Handler:
    """A handler writing to standard error (or `stream`) in `log_format`: "human" or "json"."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLines())
    else:
        handler.setFormatter(logging.Formatter(HUMAN_FORMAT, HUMAN_DATES))
    return handler


def level_for(quiet: bool, verbose: bool) -> int:
    return logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
