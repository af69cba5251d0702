"""The SSE byte stream of one subscriber: log lines of one queue (or task), and keep-alives."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

import orjson

from queues.store.inotify import Channel

from .pg_tail import PgTail, RowPosition, RowsChannel
from .tail import LogTail, Position

# How often an idle stream checks that its client is still there (cheap: one recv peek), and
# looks at its log again whatever woke it or not (a notification lost costs at most this).
LIVENESS_SECONDS = 1.0
RETRY_MS = 2000  # the browser's reconnect delay, sent once
CAUGHT_UP = b": caught up\n\n"  # a history stream has read up to the present


@dataclass(frozen=True, kw_only=True)
class Subscription:
    host: str
    queue: str
    task_id: str | None = None

    def matches(self, line: bytes) -> dict[str, object] | None:
        """The parsed line when it belongs to this subscription, else None."""
        # orjson writes `"queue":"name"` exactly so; most foreign lines are skipped unparsed.
        if b'"queue":"' + self.queue.encode() + b'"' not in line:
            return None
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None  # a damaged line is the ingester's to report, not the stream's
        if not isinstance(event, dict):
            return None
        if event.get("host") != self.host or event.get("queue") != self.queue:
            return None
        if self.task_id is not None and event.get("id") != self.task_id:
            return None
        return event


def frame(position: Position | RowPosition, event: str, line: bytes) -> bytes:
    """One SSE message. The line is compact JSON, so it never spans two `data:` lines."""
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (str(position).encode(), event.encode(), line)


def event_stream(
    tail: LogTail | PgTail,
    channel: Channel | RowsChannel,
    subscription: Subscription,
    *,
    keepalive: float,
    client_alive: Callable[[], bool] = lambda: True,
    liveness: float = LIVENESS_SECONDS,
    history: bool = False,
) -> Generator[bytes, None, None]:
    """Yield SSE chunks until the client goes (a failed write closes this generator).
    `liveness`: the longest sleep between looks (tests lengthen it to show what wakes it).
    `history`: the tail starts in the past; once it has read up to the present, a comment
    `: caught up` says so (a client showing a task's history knows that the rest is live)."""
    try:
        yield b"retry: %d\n: subscribed\n\n" % RETRY_MS  # headers and a first byte, at once
        last_write = time.monotonic()
        behind = history
        while True:
            generation = channel.generation  # read before the log, so no append is slept through
            lines = tail.read()
            chunk = []
            for position, line in lines:
                event = subscription.matches(line)
                if event is not None:
                    chunk.append(frame(position, str(event.get("event", "")), line))
            now = time.monotonic()
            if behind and tail.at_end:
                chunk.append(CAUGHT_UP)
                behind = False
            if chunk:
                yield b"".join(chunk)
                last_write = now
            elif now - last_write >= keepalive:
                # A write is also how a vanished client is found when the socket cannot be peeked.
                yield b": keep-alive\n\n"
                last_write = now
            if not client_alive():
                return
            if not lines:
                idle_for = max(keepalive - (time.monotonic() - last_write), 0.0)
                channel.wait(generation, min(liveness, idle_for))
    finally:
        channel.close()  # its directory stops being watched once no stream needs it
