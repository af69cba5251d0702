"""The live server of tests/api_live, with queues of this folder's own (their settings below),
so these tests claim nothing another test left behind."""

from __future__ import annotations

import json

import pytest

from tests.api_live.conftest import clients, live  # noqa: F401  (the fixtures themselves)
from tests.api_live.live import HOST, LiveServer

# queue -> its settings; every queue gets the three users' roles of live.py
QUEUES = {
    "cwsigint": {"lease_seconds": 60, "max_attempts": 1},
    "cwoutput": {"lease_seconds": 60, "max_attempts": 1},
    "cwgroup": {"lease_seconds": 1, "max_attempts": 3, "backoff_seconds": 0},
    "cwcancel": {"lease_seconds": 1, "max_attempts": 3, "backoff_seconds": 0},
    "cwexit": {"lease_seconds": 60, "max_attempts": 2, "backoff_seconds": 0},
    "cwexitpool": {"lease_seconds": 60, "max_attempts": 1},
    "cwlog": {"lease_seconds": 60, "max_attempts": 2, "backoff_seconds": 0},
    "cwwait": {"lease_seconds": 60, "max_attempts": 3, "backoff_seconds": 1},
    "cwtable": {"lease_seconds": 60, "max_attempts": 3},
    "cwworker": {"lease_seconds": 60, "max_attempts": 3},
    "cwfile": {"lease_seconds": 60, "max_attempts": 1},
    "cwwatch": {"lease_seconds": 60, "max_attempts": 3},
    "cwlogjson": {"lease_seconds": 60, "max_attempts": 1},
    "cwgroups": {"lease_seconds": 60, "max_attempts": 1},
    "cwgroupcb": {"lease_seconds": 60, "max_attempts": 1},
    "djcw": {"lease_seconds": 60, "max_attempts": 3, "backoff_seconds": 0},
    "djcwexit": {"lease_seconds": 60, "max_attempts": 3, "backoff_seconds": 0},
    "djcwodd": {"lease_seconds": 60, "max_attempts": 3, "backoff_seconds": 0},
    "djcwcap": {"lease_seconds": 60, "max_attempts": 1, "max_item_bytes": 250},
    "djcwctx": {"lease_seconds": 60, "max_attempts": 8},
    "djcwcancel": {"lease_seconds": 1, "max_attempts": 3, "backoff_seconds": 0},
}


@pytest.fixture(scope="session")
def queues(live: LiveServer) -> dict[str, dict[str, int]]:  # noqa: F811
    script = (
        "from queues.services import grant, save_queue\n"
        f"for name, fields in {json.dumps(QUEUES)}.items():\n"
        f"    save_queue({HOST!r}, name, **fields)\n"
        "    for user, role in (('olga', 'operator'), ('paul', 'producer'),\n"
        "                       ('wendy', 'worker')):\n"
        f"        grant(user, {HOST!r} + '/' + name, role)\n"
    )
    live.manage("shell", "-c", script)
    return QUEUES
