"""A real HTTP receiver on 127.0.0.1 (http.server in a thread) that answers the status codes a
test scripts, and a queue with a webhook pointed at it."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webhooks.models import Webhook


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    answers: deque[int] = field(default_factory=deque)  # then 200 once they run out
    requests: list[Received] = field(default_factory=list)
    connections: int = 0  # accepted TCP connections, request or not


@pytest.fixture
def receiver():
    box = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            box.requests.append(Received(self.path, dict(self.headers.items()), body))
            self.send_response(box.answers.popleft() if box.answers else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass  # quiet test output

    class Server(ThreadingHTTPServer):
        def verify_request(self, request: object, client_address: object) -> bool:
            box.connections += 1
            return True

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    box.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/taskhoster?q=1"
    yield box
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def allow_private(settings):
    settings.TASKHOSTER_WEBHOOK_ALLOW_PRIVATE = True


@pytest.fixture
def hooked_queue(make_queue, receiver, allow_private):
    """A queue whose webhook calls the receiver (loopback, allowed for the test)."""
    queue = make_queue(max_attempts=2)
    hook = Webhook(queue=queue, url=receiver.url)
    hook.full_clean()
    hook.save()
    return queue
