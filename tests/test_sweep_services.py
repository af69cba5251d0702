"""The sweep loop's services (schedules, notifications) when the database goes away mid-pass:
the next pass's sweep says the outage once, so the service says nothing of it; any other fault
is logged with its traceback."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.db import InterfaceError, OperationalError

from queues.processes.sweep_services import _run
from queues.store import StorageUnavailable

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "outage",
    [
        OperationalError("server closed the connection"),
        InterfaceError("connection already closed"),
        StorageUnavailable("The task database went away"),
    ],
)
def test_a_database_gone_mid_service_is_left_to_the_next_pass(outage, caplog):
    def service(store, *, now):
        raise outage

    with caplog.at_level(logging.DEBUG, logger="taskhoster.sweep"):
        _run("notifications", service, store=None, now=NOW)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_any_other_fault_of_a_service_is_logged_with_its_traceback(caplog):
    def service(store, *, now):
        raise ValueError("a receiver's odd answer")

    with caplog.at_level(logging.DEBUG, logger="taskhoster.sweep"):
        _run("notifications", service, store=None, now=NOW)
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "notifications failed" in record.getMessage() and record.exc_info is not None
