"""The attempts' history that the Django runner's reports carry (taskhoster/django_tasks)."""

from __future__ import annotations

from taskhoster.django_tasks.history import (
    EARLIER_MIN_CHARS,
    EARLIER_TRACEBACK_CHARS,
    TRACEBACK_CHARS,
    UNKNOWN_WORKER,
    History,
    of_attempt,
    of_body,
    of_view,
)


def test_each_failure_adds_an_error_and_earlier_tracebacks_share_a_budget():
    history = History()
    for n in range(100):
        history = history.failed("builtins.ValueError", f"attempt {n}\n" + "x" * 10_000)
    assert len(history.errors) == 100
    *earlier, newest = history.errors
    assert len(newest["traceback"]) == TRACEBACK_CHARS
    assert all(len(e["traceback"]) <= EARLIER_MIN_CHARS for e in earlier)
    assert all(e["exceptionClassPath"] == "builtins.ValueError" for e in history.errors)
    # with few earlier errors their share is above what the newest keeps: nothing more is cut
    assert EARLIER_TRACEBACK_CHARS // 2 > TRACEBACK_CHARS
    few = History().failed("a.B", "t" * 10_000).failed("a.B", "t" * 10_000)
    assert [len(e["traceback"]) for e in few.errors] == [TRACEBACK_CHARS] * 2


def test_an_attempt_takes_up_the_last_report_and_fills_lost_ones_as_unknown():
    earlier = History(started_at=1000, last_attempted_at=2000, worker_ids=["a"],
                      errors=[{"exceptionClassPath": "a.B", "traceback": "t"}])  # fmt: skip
    # attempt 3: attempt 2's lease lapsed without a report
    record = {"attempts": 3, "updatedAt": 5000, "lastError": earlier.as_body()}
    now = of_attempt(record, "c")
    assert now == History(1000, 5000, ["a", UNKNOWN_WORKER, "c"], earlier.errors)
    first = of_attempt({"attempts": 1, "updatedAt": 7000}, "z")
    assert first == History(7000, 7000, ["z"], [])


def test_a_view_reads_the_report_its_status_says_is_the_latest():
    old = History(1, 1, ["a"], []).as_body()
    new = History(1, 2, ["a", "b"], []).as_body()
    assert of_view({"status": "finished", "result": new, "lastError": old}).worker_ids == ["a", "b"]
    assert (
        of_view({"status": "processing", "progress": new, "lastError": old}).last_attempted_at == 2
    )
    assert of_view({"status": "pending", "lastError": old}).worker_ids == ["a"]
    # ended by the server (a timeout): no report of its own, the last retried one's history
    assert of_view({"status": "failed", "result": None, "lastError": old}).worker_ids == ["a"]
    # a body from before reports carried a history: its own error only
    legacy = {"exceptionClassPath": "a.B", "traceback": "t"}
    assert of_view({"status": "failed", "result": legacy}).errors == [legacy]
    assert of_body("timeout") is None


def test_a_failure_body_has_its_traceback_once_its_times_in_iso_and_one_type():
    """Issue 36: the console's page of a failed Django task showed the traceback three times
    (beside `errors`, in it, and a retried attempt's type, TaskRaisedRetry, on the last), and
    startedAt as epoch milliseconds."""
    import json

    from taskhoster.django_tasks.runner import TaskRaisedRetry, _raised
    from taskhoster.worker import _error_body

    history = History(1_751_500_000_123, 1_751_500_004_000, ["w"], [])
    try:
        raise ValueError("cannot resize a PDF")
    except ValueError as exc:
        raised = _raised(TaskRaisedRetry, exc, {"task": "a.b"}, history, "ValueError: cannot")
    body = _error_body(raised)
    assert body["type"] == "TaskRaised"
    assert "traceback" not in body and len(body["errors"]) == 1
    assert json.dumps(body).count("Traceback (most recent call last)") == 1
    assert (body["startedAt"], body["lastAttemptedAt"]) == (
        "2025-07-02T23:46:40.123Z",
        "2025-07-02T23:46:44.000Z",
    )
    again = of_body(body)  # the next attempt, and get_result, read the times back exactly
    assert (again.started_at, again.last_attempted_at) == (1_751_500_000_123, 1_751_500_004_000)
    old = of_body({**body, "startedAt": 1_751_500_000_123})  # a body written before: ms
    assert old.started_at == 1_751_500_000_123
