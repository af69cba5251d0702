"""The event stream against a real gunicorn: other processes' transitions, resume, disconnects."""

import http.client
import time

import pytest

from .live import HOST, MAX_STREAMS, QUEUE, SHORT
from .sse import SseReader

pytestmark = pytest.mark.slow


def events_path(queue: str, task: str | None = None) -> str:
    path = f"/api/v1/queues/{HOST}/{queue}/events"
    return path + f"?task={task}" if task else path


def test_a_subscriber_sees_posted_claimed_and_the_sweeps_requeue(live, clients):
    stream = SseReader(live.url, events_path(SHORT), live.tokens["olga"])
    try:
        assert stream.response.status == 200
        task = clients["paul"].post(HOST, SHORT, {"n": 1})
        posted = stream.until("posted", task["id"])
        assert posted["data"]["status"] == "pending" and posted["id"].count(":") == 1
        claimed = clients["wendy"].claim(HOST, SHORT, "box-1", lease=1)
        assert stream.until("claimed", claimed["id"])["data"]["worker"] == "box-1"
        time.sleep(1.1)  # the 1 s lease lapses: real time, the sweep runs in its own process
        live.sweep()
        requeue = stream.until("requeue", task["id"], timeout=5)
        assert requeue["data"]["status"] == "pending"
    finally:
        stream.close()


def test_last_event_id_resumes_without_repeats_or_gaps(live, clients):
    first = SseReader(live.url, events_path(QUEUE), live.tokens["olga"])
    ids = [clients["paul"].post(HOST, QUEUE, {"n": n})["id"] for n in range(5)]
    seen = [first.until("posted", task_id) for task_id in ids]
    first.close()
    more = [clients["paul"].post(HOST, QUEUE, {"n": n})["id"] for n in range(5, 8)]
    resumed = SseReader(live.url, events_path(QUEUE), live.tokens["olga"], seen[1]["id"])
    try:
        got = [resumed.next_message()["data"]["id"] for _ in range(6)]
        assert got == (ids[2:] + more)[:6]
    finally:
        resumed.close()


def test_the_task_filter_and_refusals(live, clients):
    one = clients["paul"].post(HOST, QUEUE, {"n": 1})
    stream = SseReader(live.url, events_path(QUEUE, one["id"]), live.tokens["paul"])
    try:
        clients["paul"].post(HOST, QUEUE, {"n": 2})
        clients["paul"].cancel(HOST, QUEUE, one["id"])
        message = stream.next_message()
        assert (message["event"], message["data"]["id"]) == ("cancelled", one["id"])
    finally:
        stream.close()
    nobody = SseReader(live.url, events_path("nope"), live.tokens["olga"])
    assert nobody.response.status == 404
    assert nobody.response.read().startswith(b'{"code":"not_found"')


def _stream_with_a_thread(live, deadline: float) -> SseReader:
    """A stream that got a thread (its first line is the 2 s retry, not the busy hint); one
    that was turned away is tried again until the deadline (a left client is noticed within
    about a second)."""
    while True:
        stream = SseReader(live.url, events_path(QUEUE), live.tokens["olga"])
        if stream.response.readline() == b"retry: 2000\n":
            return stream
        stream.close()
        assert time.monotonic() < deadline, "no stream thread came free"
        time.sleep(0.1)


def _answered_quickly(live) -> None:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=10)
    conn.request("GET", f"/api/v1/queues/{HOST}/{QUEUE}/tasks",
                 headers={"Authorization": f"Bearer {live.tokens['olga']}"})  # fmt: skip
    assert conn.getresponse().status == 200
    conn.close()
    assert time.monotonic() - started < 5


def test_streams_take_at_most_their_threads_and_clients_that_leave_free_them(live, clients):
    for _ in range(2):  # the second round only gets threads the first round's streams freed
        deadline = time.monotonic() + 10
        streams = [_stream_with_a_thread(live, deadline) for _ in range(MAX_STREAMS)]
        extra = SseReader(live.url, events_path(QUEUE), live.tokens["olga"])
        assert extra.response.getheader("Retry-After") == "5"
        assert extra.response.readline() == b"retry: 5000\n"  # turned away: reconnect later
        extra.close()
        _answered_quickly(live)  # the process still has threads for everything else
        for stream in streams:
            stream.close()
    _answered_quickly(live)
