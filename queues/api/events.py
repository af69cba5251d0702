"""GET /api/v1/queues/{host}/{queue}/events: the queue's transitions as Server-Sent Events.

The stream reads the event log's day-files, not this process's memory, so a transition made
by any process (another gunicorn worker, the sweep) reaches every subscriber. Operators of the
queue (and staff) may follow the whole queue; a producer may follow one of its own tasks with
`task=`, checked once at subscription while the task is still in the store. With `from=posted`
a task's stream starts with its events so far, then a `: caught up` comment, then follows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Generator, Iterable
from typing import Any

from django.conf import settings
from django.db import connections
from django.http import StreamingHttpResponse
from rest_framework.exceptions import NotAuthenticated, ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from queues import stores
from queues.api import held_threads
from queues.api.authentication import BearerAuthentication
from queues.api.client_socket import still_connected
from queues.api.context import QueueContext, resolve
from queues.api.errors import exception_handler
from queues.api.worker_stop import until_stopping
from queues.models import Role
from queues.monitor.pg_tail import PgTail, RowPosition, RowsChannel
from queues.monitor.stream import Subscription, event_stream
from queues.monitor.tail import BadPosition, LogTail, Position
from queues.store import paths
from queues.store.errors import StorageUnavailable
from queues.store.inotify import APPENDS, watcher

# A stream the process has no thread for: EventSource reconnects after `retry` (and resumes
# from Last-Event-ID), where an error status would make it give up for good.
BUSY_RETRY_SECONDS = 5
BUSY = b"retry: %d\n: this server process holds its most streams; reconnect later\n\n" % (
    BUSY_RETRY_SECONDS * 1000
)


class HeldStream:
    """The stream's chunks, holding one of the process's waiting threads until it is closed.

    A class, not a generator: the server closes the response even when the client left before
    the first chunk, and only a close() of our own then frees the slot (a generator that never
    started runs no `finally`)."""

    def __init__(self, chunks: Generator[bytes, None, None]) -> None:
        self._chunks = chunks
        self._held = True

    def __iter__(self) -> HeldStream:
        return self

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        try:
            self._chunks.close()
        finally:
            if self._held:
                self._held = False
                held_threads.release_stream()


def sse_response(chunks: Iterable[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a buffering proxy would hold every event back
    return response


def keepalive_seconds() -> float:
    """The comment-line interval (tests shorten it through the environment)."""
    return max(float(settings.TASKHOSTER_SSE_KEEPALIVE_SECONDS), 0.05)


class JsonFirst(BaseContentNegotiation):
    """An `Accept: text/event-stream` request must still get its refusals as JSON."""

    def select_parser(self, request: Request, parsers: list[Any]) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        return renderers[0], renderers[0].media_type


def check_subscriber(ctx: QueueContext, task_id: str | None) -> None:
    """Operators follow anything; a producer only its own task (else the uniform refusals)."""
    if not ctx.authenticated:
        raise NotAuthenticated()  # even on a publicly posted queue: the log is not public
    if ctx.operator:
        return
    if task_id is None or Role.PRODUCER not in ctx.roles:
        ctx.require(Role.OPERATOR, hint="A producer may follow one of its own tasks (?task=ID).")
    assert task_id is not None
    ctx.check_visible(stores.of(ctx.host, ctx.queue).read(ctx.host, ctx.queue, task_id))


def start_position(request: Request, *, rows: bool) -> Position | RowPosition | None:
    """Where to start: after `Last-Event-ID` (or `lastEventId`, for a first EventSource URL);
    `rows`: a PostgreSQL queue's stream, whose positions are event rows (pg_tail.py)."""
    text = request.headers.get("Last-Event-ID") or request.query_params.get("lastEventId")
    try:
        if not text:
            return None
        return RowPosition.parse(text) if rows else Position.parse(text)
    except BadPosition:
        raise ValidationError("Last-Event-ID is not a position of this log.") from None


# How far before a task's posting its history starts: a line is stamped when its change is
# made and written (or committed) a moment later, so another task's older line may land after
# this task's first one; the stream's filter drops the lines of other tasks.
HISTORY_SLACK_MS = 60_000


def history_start(request: Request, ctx: QueueContext, task_id: str | None, *, rows: bool
                  ) -> Position | RowPosition | None:  # fmt: skip
    """With `from=posted` (and `task=`), where the task's history begins: the day-file of its
    posting, or the newest event row stamped before it; None without `from`."""
    origin = request.query_params.get("from")
    if origin is None:
        return None
    if origin != "posted":
        raise ValidationError("from must be 'posted' (the task's events since its posting).")
    if task_id is None:
        raise ValidationError("from=posted needs task=ID: a queue's whole history is not streamed.")
    task = stores.of(ctx.host, ctx.queue).read(ctx.host, ctx.queue, task_id)
    since = task.posted_at - HISTORY_SLACK_MS
    if rows:
        return RowPosition(
            stores.router().postgres.last_event_id(ctx.host, ctx.queue, before_ms=since)
        )
    return Position(dt.datetime.fromtimestamp(since / 1000, dt.UTC).date(), 0)


def release_database() -> None:
    """The stream never touches the database again: a hundred monitors must not hold a
    hundred PostgreSQL connections for hours. Inside a transaction (a test's, or
    ATOMIC_REQUESTS) closing would doom it, so the connection is left to the request's end."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


class EventStreamView(APIView):
    authentication_classes = [BearerAuthentication]
    permission_classes: list[Any] = []
    renderer_classes = [JSONRenderer]
    content_negotiation_class = JsonFirst

    def get_exception_handler(self) -> Callable[..., Any]:
        return exception_handler  # the API's uniform bodies, whatever the site settings say

    def get(self, request: Request, host: str, queue: str) -> StreamingHttpResponse:
        ctx = resolve(request, host, queue)
        task_id = request.query_params.get("task")
        if task_id is not None:
            paths.validate_task_id(task_id)  # not a task id: the uniform 404
        check_subscriber(ctx, task_id)
        on_postgres = stores.router().is_postgres(ctx.host, ctx.queue)
        # a reconnect's Last-Event-ID resumes where it was; else the task's history, if asked
        since_posted = history_start(request, ctx, task_id, rows=on_postgres)
        position = start_position(request, rows=on_postgres) or since_posted
        history = since_posted is not None
        if not held_threads.take_stream():
            busy = sse_response([BUSY])
            busy["Retry-After"] = str(BUSY_RETRY_SECONDS)
            return busy
        subscription = Subscription(host=ctx.host, queue=ctx.queue, task_id=task_id)
        try:
            if isinstance(position, RowPosition) or (on_postgres and position is None):
                return self._rows_stream(request, subscription, position, history=history)
            return self._stream(request, subscription, position, history=history)
        except BaseException:
            held_threads.release_stream()
            raise

    def _stream(
        self,
        request: Request,
        subscription: Subscription,
        position: Position | None,
        *,
        history: bool = False,
    ) -> StreamingHttpResponse:
        tasks_dir = settings.TASKHOSTER_LOGS_DIR / "tasks"
        try:
            tasks_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # a full, read-only or broken logs directory: the documented 503, not a bug's 500
            raise StorageUnavailable(f"the event log cannot be followed: {exc.strerror}") from exc
        # On the process's shared watcher: this channel wakes on day-file appends, which
        # waiting claims (on pending/ only) never see.
        channel = watcher().channel([str(tasks_dir)], APPENDS)
        tail = LogTail(settings.TASKHOSTER_LOGS_DIR, position)  # positioned before any byte
        release_database()
        stream = event_stream(tail, channel, subscription, keepalive=keepalive_seconds(),
                              client_alive=until_stopping(still_connected(request.META)),
                              history=history)  # fmt: skip
        return sse_response(HeldStream(stream))

    def _rows_stream(
        self,
        request: Request,
        subscription: Subscription,
        position: RowPosition | None,
        *,
        history: bool = False,
    ) -> StreamingHttpResponse:
        """A PostgreSQL queue's stream: its store's event rows, from any web server."""
        follower = stores.router().postgres.follow_events(
            subscription.host,
            subscription.queue,
            after_id=position.row_id if position is not None else None,
        )
        release_database()  # the rows come over the store's own connections
        stream = event_stream(PgTail(follower), RowsChannel(follower), subscription,
                              keepalive=keepalive_seconds(),
                              client_alive=until_stopping(still_connected(request.META)),
                              history=history)  # fmt: skip
        return sse_response(HeldStream(stream))
