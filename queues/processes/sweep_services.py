"""What the sweep loop does each pass besides the store's sweep: post the schedules that are
due, then make and send failure notifications. `manage.py sweep` calls `run_sweep_services`
after its one sweep; `sweep --loop` runs them in a thread of their own
(`run_sweep_services_every`), so that receivers, however slow, never delay the store's time
rules (timeouts, lapsed leases). The store itself knows nothing of either.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError, connections
from django.utils import timezone

from queues.store import StorageUnavailable
from queues.stores.router import StoreOf, StoreRouter
from schedules.running import post_due_schedules
from webhooks.notifying import notify

logger = logging.getLogger("taskhoster.sweep")


def run_sweep_services(store: StoreRouter, *, now: dt.datetime | None = None) -> None:
    now = now or timezone.now()
    # the schedules need each queue's store; the notifications the file store's day-files too
    for name, service, reach in (
        ("schedules", post_due_schedules, store.of),
        ("notifications", notify, store),
    ):
        _run(name, service, reach, now)


def run_sweep_services_every(
    store: StoreRouter, interval: float, stop: threading.Event
) -> threading.Thread:
    """Run the services, then wait `interval` s, over and over in a thread until `stop` is set.
    A daemon thread: Ctrl-C ends the loop's process with it, a send in flight included (its
    notification is held a minute, then sent again: delivery is at least once)."""

    def passes() -> None:
        while not stop.is_set():
            try:
                run_sweep_services(store)
            except Exception:  # the thread must outlive any fault, as the loop does
                logger.exception("sweep: the schedules and notifications failed; trying again")
            stop.wait(interval)

    thread = threading.Thread(target=passes, name="sweep-services", daemon=True)
    thread.start()
    return thread


def _run(
    name: str, service: Callable[..., Any], store: StoreRouter | StoreOf, now: dt.datetime
) -> None:
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
