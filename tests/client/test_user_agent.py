"""The client and the command line name themselves in every request's User-Agent, so a server's
access log tells them (and their version) apart from browsers and curl."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

from taskhoster.client import VERSION, Client

TASK = {"id": "0123456789abcdef", "status": "pending", "attempts": 0, "updatedAt": 0}


@pytest.fixture
def recorder():
    """An HTTP server on a free port that answers every request with TASK and keeps what each
    request's User-Agent said."""
    agents: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            agents.append(self.headers.get("User-Agent"))
            body = json.dumps(TASK).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", agents
    server.shutdown()
    server.server_close()


def test_the_command_line_and_the_client_send_their_names(recorder):
    url, agents = recorder
    done = subprocess.run(
        [sys.executable, "-m", "taskhoster.cli", "status", "ex.com/q", TASK["id"], "--json"],
        env={**os.environ, "TASKHOSTER_URL": url, "TASKHOSTER_TOKEN": "th_x"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    Client(url).get("ex.com", "q", TASK["id"])
    assert agents == [f"taskhoster-cli/{VERSION}", f"taskhoster-client/{VERSION}"]
    assert VERSION != "unknown"  # the installed package's own
