"""The one retry policy (taskhoster/backoff.py): its schedule, what it retries, and how the
client, the worker loop and the command line use it, against a real socket or a stub server."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from taskhoster import ApiError, Client, run_worker
from taskhoster.backoff import (
    MOST_PAUSE_SECONDS,
    pause_for,
    reason,
    retryable,
    retrying_line,
    schedule,
    with_backoff,
)
from tests.api_live.live import free_port
from tests.client.test_client import stub  # noqa: F401  (the fixture itself)


def refused() -> None:
    """A connection to a port nobody listens on."""
    Client(f"http://127.0.0.1:{free_port()}", tries=1).get("h.example", "q", "t")


def busy(status: int, headers: dict[str, str] | None = None) -> ApiError:
    return ApiError(status, "storage_unavailable" if status == 503 else "x", "Busy.", headers)


def test_the_schedule_doubles_from_half_a_second_up_to_its_cap():
    assert list(schedule(5)) == [0.5, 1, 2, 4]
    assert list(schedule(1)) == []
    endless = schedule(None)
    pauses = [next(endless) for _ in range(10)]
    assert pauses[:7] == [0.5, 1, 2, 4, 8, 16, MOST_PAUSE_SECONDS]
    assert pauses[7:] == [MOST_PAUSE_SECONDS] * 3


@pytest.mark.parametrize(
    ("error", "once_only", "repeatable_too"),
    [
        (ConnectionRefusedError(), True, True),
        (ConnectionResetError(), False, True),
        (TimeoutError(), False, True),
        (busy(429), True, True),
        (busy(503), True, True),
        (busy(502), False, True),
        (busy(504), False, True),
        (busy(500), False, True),
        (busy(400), False, False),
        (busy(404), False, False),
        (ValueError("not ours"), False, False),
    ],
)
def test_what_is_retried(error, once_only, repeatable_too):
    assert retryable(error, repeatable=False) is once_only
    assert retryable(error, repeatable=True) is repeatable_too


def test_retry_after_is_honoured_up_to_the_cap_and_a_planned_pause_is_jittered_below_it():
    assert pause_for(busy(429, {"retry-after": "3"}), 0.5) == 3
    assert pause_for(busy(503, {"retry-after": "900"}), 0.5) == MOST_PAUSE_SECONDS
    pauses = {pause_for(ConnectionRefusedError(), 10) for _ in range(50)}
    assert all(8 <= pause <= 10 for pause in pauses) and len(pauses) > 1
    assert 8 <= pause_for(busy(503, {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}), 10) <= 10


@pytest.mark.parametrize("header", ["٣", "nan", "inf", "2_0", "-5"])
def test_a_retry_after_in_no_ascii_delay_seconds_is_passed_over_for_the_schedule(header):
    """RFC 9110's delay-seconds is 1*DIGIT: float() would read "٣" as 3 and "nan" as a pause
    that time.sleep() refuses."""
    assert 8 <= pause_for(busy(503, {"retry-after": header}), 10) <= 10


def test_the_retrying_line_names_the_failure_and_what_follows():
    assert reason(busy(503)) == "503 storage_unavailable"
    assert retrying_line(ConnectionRefusedError(), 5, 0.5) == (
        "connection refused; retrying (4 more tries)"
    )
    assert retrying_line(busy(429), 2, 0.5) == "429 x; retrying (1 more try)"
    assert retrying_line(busy(503), None, 0.45) == (
        "503 storage_unavailable; retrying in 0.5 s, then with a growing pause"
    )


def test_a_refused_connection_is_tried_as_often_as_asked_and_said_once():
    said, calls = [], []

    def call() -> None:
        calls.append(1)
        refused()

    with pytest.raises(ConnectionRefusedError):
        with_backoff(call, tries=3, repeatable=False, say=said.append)
    assert len(calls) == 3
    assert said == ["connection refused; retrying (2 more tries)"]


def test_a_refusal_no_retry_mends_is_raised_at_once():
    calls = []

    def call() -> None:
        calls.append(1)
        raise busy(404)

    with pytest.raises(ApiError):
        with_backoff(call, tries=5, repeatable=True, say=calls.append)
    assert calls == [1]  # tried once, and nothing said


def test_a_server_error_is_retried_only_for_a_call_that_may_arrive_twice(stub):  # noqa: F811
    handler, url = stub
    error = (500, {"code": "http_error", "detail": "Boom."})
    done = (200, {"id": "t", "status": "pending"})
    client = Client(url, tries=1)
    handler.answers = [error, done]
    assert with_backoff(lambda: client.get("h.example", "q", "t"), tries=3,
                        repeatable=True)["status"] == "pending"  # fmt: skip
    handler.answers = [error, done]
    with pytest.raises(ApiError):
        with_backoff(lambda: client.get("h.example", "q", "t"), tries=3, repeatable=False)
    assert handler.answers == [done]  # sent once


def test_a_stop_during_a_pause_ends_the_tries_at_once():
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    with pytest.raises(ConnectionRefusedError):
        with_backoff(refused, tries=None, repeatable=True, stop=stop)
    assert stop.is_set() and time.monotonic() - started < MOST_PAUSE_SECONDS


def test_the_clients_idempotent_calls_are_tried_as_often_as_it_was_told(stub):  # noqa: F811
    handler, url = stub
    handler.answers = [("drop", None), ("drop", None), (200, {"id": "t"})]
    with pytest.raises(OSError):
        Client(url, tries=2).get("h.example", "q", "t")
    assert handler.answers == [(200, {"id": "t"})]  # two tries, not three
    assert Client(url, tries=2).get("h.example", "q", "t") == {"id": "t"}


def test_the_worker_says_a_failing_claim_once_and_claims_again(stub, caplog):  # noqa: F811
    handler, url = stub
    unavailable = (503, {"code": "storage_unavailable", "detail": "Disk."})
    handler.answers = [unavailable, unavailable, (200, {"id": "t1", "attempts": 1, "item": {}}),
                       (200, {"id": "t1", "status": "finished"})]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="taskhoster.worker"):
        assert run_worker(Client(url), "h.example", "q", "w", lambda job: {"ok": 1}, wait=0,
                          max_tasks=1) == 1  # fmt: skip
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1
    assert warned[0].startswith("claim on h.example/q failed: 503 storage_unavailable; retrying in")
    assert [path.rsplit("/", 1)[-1] for _, path, _, _ in handler.seen] == [
        "claim", "claim", "claim", "result"]  # fmt: skip


def test_a_worker_report_that_keeps_failing_is_given_up_after_its_tries(stub, caplog):  # noqa: F811
    from taskhoster.worker import REPORT_TRIES

    handler, url = stub
    unavailable = (503, {"code": "storage_unavailable", "detail": "Disk."}, {"Retry-After": "0"})
    handler.answers = [(200, {"id": "t1", "attempts": 1, "item": {}}),
                       *[unavailable] * REPORT_TRIES]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="taskhoster.worker"):
        run_worker(Client(url), "h.example", "q", "w", lambda job: {"ok": 1}, wait=0, max_tasks=1)
    reports = [path for _, path, _, _ in handler.seen if path.endswith("/result")]
    assert len(reports) == REPORT_TRIES and not handler.answers
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "report failed: 503 storage_unavailable; retrying (5 more tries)"
    assert messages[1] == "a task's outcome could not be reported"


def test_the_command_line_retries_a_read_after_a_busy_server_and_says_so(stub, capsys):  # noqa: F811
    from taskhoster.cli import OK, SERVER, main

    handler, url = stub
    view = {"id": "a" * 16, "status": "pending", "attempts": 0, "postedAt": 1}
    handler.answers = [(503, {"code": "storage_unavailable", "detail": "Disk."},
                        {"Retry-After": "0"}), (200, view)]  # fmt: skip
    assert main(["status", "h.example/q", "a" * 16, "--url", url, "--json"]) == OK
    out, err = capsys.readouterr()
    assert err == "taskhoster: 503 storage_unavailable; retrying (4 more tries)\n"
    assert '"status": "pending"' in out and len(handler.seen) == 2
    # a post without --key may have been stored by a server that then failed: not sent again
    handler.answers, handler.seen[:] = [(500, {"code": "internal", "detail": "Boom."})], []
    assert main(["post", "h.example/q", "{}", "--url", url]) == SERVER
    assert len(handler.seen) == 1 and "retrying" not in capsys.readouterr().err
