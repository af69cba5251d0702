"""OpenTelemetry for the client side, when `opentelemetry-api` is installed
(`pip install 'taskhoster[otel]'`); without it every function here does nothing.

The client sends the current trace context with each request (`traceparent`), so the server's
span for a post is a child of the producer's span; the server keeps that post's context on the
task, and the worker loop (the Django backend's worker too) runs each task in a `process` span
linked to it. What exports the spans is the application's own tracer provider, configured as
OpenTelemetry's SDK reads the OTEL_* variables; this module only uses the API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

try:
    from opentelemetry import propagate, trace
except ImportError:  # the extra is not installed: no tracing
    propagate = trace = None  # type: ignore[assignment]

SYSTEM = "taskhoster"


def inject(headers: dict[str, str]) -> None:
    """Add the current span's context (`traceparent`, `tracestate`) to a request's headers."""
    if propagate is not None:
        propagate.inject(headers)


@contextlib.contextmanager
def processing(host: str, queue: str, task: dict[str, Any], worker: str) -> Iterator[None]:
    """A span for running one task, linked to the span of the post that made it (the
    task's stored `traceparent`); the handler's own spans are its children."""
    if trace is None or propagate is None:
        yield
        return
    links = []
    stored = task.get("traceparent")
    if isinstance(stored, str):
        producer = trace.get_current_span(propagate.extract({"traceparent": stored}))
        if producer.get_span_context().is_valid:
            links.append(trace.Link(producer.get_span_context()))
    tracer = trace.get_tracer("taskhoster.worker")
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": queue,
        "messaging.message.id": str(task.get("id", "")),
        "messaging.consumer.group.name": worker,
        "server.address": host,
        "taskhoster.attempt": int(task.get("attempts") or 0),
    }
    with tracer.start_as_current_span(f"process {queue}", kind=trace.SpanKind.CONSUMER,
                                      links=links, attributes=attributes):  # fmt: skip
        yield
