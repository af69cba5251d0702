"""What the login lockout (django-axes) writes to the server's log: its lockouts, one line each."""

from __future__ import annotations

import logging

# Axes also says each failed login it counted (a "New" or "Repeated login failure" line, then
# the lockout's own line for the same login): the counts are in its admin pages already.
COUNTED_FAILURE = ("AXES: New login failure", "AXES: Repeated login failure")


class LockoutsOnly(logging.Filter):
    """Drops axes' line for each counted failure; keeps every other line it writes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(COUNTED_FAILURE)
