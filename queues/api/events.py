"""GET /api/v1/queues/{host}/{queue}/events: the queue's transitions as Server-Sent Events.

The stream reads the event log's day-files, not this process's memory, so a transition made
by any process (another gunicorn worker, the sweep) reaches every subscriber. Operators of the
queue (and staff) may subscribe; a producer may not, even with `task=` for its own task (the
check would need the task's owner from the store, and a finished task's file may be gone).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connections
from django.http import StreamingHttpResponse
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from queues import access
from queues.models import Queue, Role
from queues.monitor.stream import Subscription, event_stream
from queues.monitor.tail import BadPosition, LogTail, Position
from queues.monitor.watch import log_watcher
from queues.store import paths
from queues.store.errors import StoreError
from queues.tokens import find_token

DEFAULT_KEEPALIVE_SECONDS = 15.0


def keepalive_seconds() -> float:
    """The comment-line interval: a setting, or the environment (tests shorten it)."""
    value = getattr(settings, "TASKHOSTER_SSE_KEEPALIVE_SECONDS", None)
    if value is None:
        value = os.environ.get("TASKHOSTER_SSE_KEEPALIVE_SECONDS", DEFAULT_KEEPALIVE_SECONDS)
    return max(float(value), 0.05)


def refusal(status: int, code: str, detail: str) -> Response:
    return Response({"code": code, "detail": detail}, status=status)


NOT_FOUND = ("not_found", "Not found.")


class JsonFirst(BaseContentNegotiation):
    """An `Accept: text/event-stream` request must still get its refusals as JSON."""

    def select_parser(self, request: Request, parsers: list[Any]) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        return renderers[0], renderers[0].media_type


def bearer_user(request: Request) -> Any | None:
    """The user a bearer token names (temporary until the API's authentication class lands)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    record = find_token(token.strip())
    return record.user if record is not None else None


def socket_alive(meta: dict[str, Any]) -> Callable[[], bool]:
    """A check that the client has not closed its connection (gunicorn exposes the socket).

    An SSE client never sends after its request, so a readable socket that yields no byte
    means the peer hung up: the thread is freed within a second instead of at the next write.
    """
    sock = meta.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return lambda: True

    def alive() -> bool:
        try:
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False

    return alive


class EventStreamView(APIView):
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []
    renderer_classes = [JSONRenderer]
    content_negotiation_class = JsonFirst

    def get(self, request: Request, host: str, queue: str) -> Response | StreamingHttpResponse:
        user = bearer_user(request)
        if user is None:
            return refusal(401, "not_authenticated", "A valid bearer token is required.")
        found = Queue.objects.filter(host__name=host, name=queue).first()
        task_id = request.query_params.get("task")
        if found is None or not access.has_role(user, found, Role.OPERATOR):
            return refusal(404, *NOT_FOUND)
        try:
            if task_id is not None:
                paths.validate_task_id(task_id)
            start = request.headers.get("Last-Event-ID") or request.query_params.get("lastEventId")
            position = Position.parse(start) if start else None
        except StoreError:
            return refusal(404, *NOT_FOUND)
        except BadPosition:
            return refusal(400, "invalid_request", "Last-Event-ID is not a position of this log.")
        logs_dir = settings.TASKHOSTER_LOGS_DIR
        (logs_dir / "tasks").mkdir(parents=True, exist_ok=True)
        watcher = log_watcher()
        watcher.watch(logs_dir / "tasks")
        tail = LogTail(logs_dir, position)  # positioned now, before the client sees a byte
        subscription = Subscription(host=host, queue=queue, task_id=task_id)
        # The stream never touches the database again: a hundred monitors must not hold a
        # hundred PostgreSQL connections for hours.
        connections.close_all()
        response = StreamingHttpResponse(
            event_stream(
                tail,
                watcher,
                subscription,
                keepalive=keepalive_seconds(),
                client_alive=socket_alive(request.META),
            ),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # a buffering proxy would hold every event back
        return response
