"""A claim whose client is gone hands it nothing, and costs the task no attempt: the request's
socket (gunicorn's `gunicorn.socket`, here one end of a real socket pair whose other end is
the client's) is looked at before a waiting claim takes a task, and once more after any claim
took some. A claim that took tasks as its client left (the race) gives them back at once,
their attempts uncounted (`unclaimed`), answering 204 to no one. tests/api_live closes the
socket of a real client while its claim waits in a real gunicorn.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from queues.store import State
from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
CLAIM = url(HOST, QUEUE, "claim")


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the server's end, the client's end) of a TCP connection on the loopback."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    yield server, client
    server.close()
    client.close()


def claim(world, server_end: socket.socket, **body):
    return world.client("bob").post(CLAIM, {"worker": "box-1", **body}, format="json",
                                    **{"gunicorn.socket": server_end})  # fmt: skip


def test_a_claim_that_took_tasks_as_its_client_left_gives_them_back_uncounted(world, pair):
    """The race: the client's end is closed, and a claim that does not wait has nothing to
    look at before it takes: it takes, sees the connection gone, and gives both back."""
    server_end, client_end = pair
    tasks = [world.post(), world.post()]
    client_end.close()
    r = claim(world, server_end, max=5)
    assert r.status_code == 204, r.content
    for task in tasks:
        back = world.store.read(HOST, QUEUE, task.id)
        assert (back.status, back.attempts, back.lease) == (State.PENDING, 0, None)
        assert [line["event"] for line in world.events(task.id)] == [
            "posted", "claimed", "unclaimed"]  # fmt: skip
        assert world.events(task.id)[-1]["worker"] == "box-1"
    again = world.client("bob").post(CLAIM, {"worker": "box-2", "max": 5}, format="json")
    assert sorted((t["id"], t["attempts"]) for t in again.json()["tasks"]) == sorted(
        (task.id, 1) for task in tasks)  # fmt: skip


def test_a_waiting_claim_whose_client_is_gone_takes_nothing(world, pair):
    server_end, client_end = pair
    task = world.post()
    client_end.close()
    r = claim(world, server_end, wait=20)
    assert r.status_code == 204, r.content
    assert [line["event"] for line in world.events(task.id)] == ["posted"]
    assert world.store.read(HOST, QUEUE, task.id).attempts == 0


def test_a_reset_connection_is_gone_too(world, pair):
    server_end, client_end = pair
    task = world.post()
    client_end.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client_end.close()  # with a linger of 0: a reset, not a FIN
    assert claim(world, server_end).status_code == 204
    assert world.store.read(HOST, QUEUE, task.id).status is State.PENDING


def test_a_client_still_connected_gets_its_task(world, pair):
    """No false alarm: an open connection, even one with more bytes sent on it (a pipelined
    request), is a client still there."""
    server_end, client_end = pair
    task = world.post()
    client_end.sendall(b"GET / HTTP/1.1\r\n")
    r = claim(world, server_end, wait=5)
    assert (r.status_code, r.json()["id"], r.json()["attempts"]) == (200, task.id, 1)
    assert world.store.read(HOST, QUEUE, task.id).status is State.PROCESSING
