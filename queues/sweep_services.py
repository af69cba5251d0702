"""What the sweep loop does each pass besides the store's sweep: post the schedules that are
due, then make and send failure notifications. The sweep command calls `run_sweep_services`
once per pass; the store itself knows nothing of either.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError, connections
from django.utils import timezone

from queues.store import StorageUnavailable
from queues.store_router import StoreRouter
from schedules.running import post_due_schedules
from webhooks.notifying import notify

logger = logging.getLogger("taskhoster.sweep")


def run_sweep_services(store: StoreRouter, *, now: dt.datetime | None = None) -> None:
    now = now or timezone.now()
    for name, service in (("schedules", post_due_schedules), ("notifications", notify)):
        _run(name, service, store, now)


def _run(name: str, service: Callable[..., Any], store: StoreRouter, now: dt.datetime) -> None:
    # A fault in one of these (a receiver's odd answer, a bad row) is logged and the loop goes
    # on: the same loop times out tasks and hands lapsed leases to other workers, which must
    # not stop because a schedule or a webhook could not be served.
    try:
        service(store, now=now)
    except (OperationalError, InterfaceError, StorageUnavailable):
        # The database went away during the service (the sweep of this pass found it up): the
        # next pass's sweep meets the outage and says it once, as the loop does for the whole
        # outage; a traceback here would say it again, in another voice, for each service.
        connections.close_all()
        logger.debug("sweep: %s met the database down", name)
    except Exception:
        logger.exception("sweep: %s failed; the next pass tries again", name)
