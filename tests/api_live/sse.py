"""A minimal SSE reader for the tests: one connection, messages as dicts, bounded reads."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any


class SseReader:
    def __init__(self, url: str, path: str, token: str, last_event_id: str | None = None) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=10)
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        self.conn.request("GET", path, headers=headers)
        self.response = self.conn.getresponse()
        self.comments = 0

    def next_message(self, timeout: float = 10) -> dict[str, Any]:
        """The next message that has an event (comments are counted, not returned)."""
        deadline = time.monotonic() + timeout
        message: dict[str, Any] = {}
        while time.monotonic() < deadline:
            line = self.response.readline().decode().rstrip("\n")
            if line.startswith(":"):
                self.comments += 1
            elif line == "":
                if "event" in message:
                    message["data"] = json.loads(message["data"])
                    return message
                message = {}
            else:
                name, _, value = line.partition(": ")
                message[name] = value
        raise TimeoutError("no event within the timeout")

    def until(self, event: str, task_id: str, timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self.next_message(max(deadline - time.monotonic(), 0.1))
            if message["event"] == event and message["data"]["id"] == task_id:
                return message

    def close(self) -> None:
        self.response.close()
        self.conn.close()
