"""OpenTelemetry spans of the server, when `opentelemetry-api` is installed
(`pip install 'taskhoster[otel]'`): nothing here imports it otherwise, and without a tracer
provider every span is OpenTelemetry's no-op.

A span for each post, claim and report of the API (messaging semantic conventions:
`messaging.system = "taskhoster"`, `messaging.operation.name`, `messaging.destination.name` =
the queue), a child of the caller's span when the request carries `traceparent`; and one for
each pass of the sweep loop that changed something. A post's span context is stamped on the
tasks it makes (queues/store/trace_context.py), for the worker's span to link to.

The tracer provider: one an application or `opentelemetry-instrument` set already, else, when
OTEL_TRACES_EXPORTER names one (`console`, or `otlp` with its exporter package installed) and
the SDK is installed, the SDK's, configured by the standard OTEL_* variables (service name,
resource attributes, sampler, the exporter's endpoint).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from queues.store import trace_context

try:
    from opentelemetry import context, propagate, trace
except ImportError:  # the extra is not installed
    context = propagate = trace = None  # type: ignore[assignment]

SYSTEM = "taskhoster"
# route name -> (messaging.operation.name, messaging.operation.type, span kind's name)
OPERATIONS = {
    "queues:api:tasks": ("post", "send", "PRODUCER"),
    "queues:api:post-many": ("post", "send", "PRODUCER"),
    "queues:api:claim": ("claim", "receive", "CONSUMER"),
    "queues:api:result": ("result", "settle", "CONSUMER"),
    "queues:api:fail": ("fail", "settle", "CONSUMER"),
    "queues:api:finish-many": ("finish", "settle", "CONSUMER"),
}
_ATTACHED = "_taskhoster_span"
_configured = threading.Lock()
_done = False


def available() -> bool:
    return trace is not None


def configure() -> bool:
    """Once per process: set up the provider if OTEL_* asks for one, and stamp posts' contexts
    on their tasks. False when OpenTelemetry is not installed."""
    global _done
    if trace is None:
        return False
    with _configured:
        if not _done:
            _done = True
            _sdk_from_environment()
            if not trace_context.CURRENT:
                trace_context.CURRENT.append(current_traceparent)
    return True


def _sdk_from_environment() -> None:
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    disabled = os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    if disabled or exporter_name in {"", "none"}:
        return
    if type(trace.get_tracer_provider()).__name__ != "ProxyTracerProvider":
        return  # the application (or opentelemetry-instrument) set its own
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        return  # the API alone: no-op spans
    exporter: Any
    if exporter_name == "console":
        exporter = ConsoleSpanExporter()
    elif exporter_name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise RuntimeError("OTEL_TRACES_EXPORTER=otlp needs the package "
                               "opentelemetry-exporter-otlp-proto-http") from exc  # fmt: skip
        exporter = OTLPSpanExporter()  # OTEL_EXPORTER_OTLP_* say where
    else:
        raise ValueError(f"OTEL_TRACES_EXPORTER={exporter_name!r}: taskhoster knows 'console', "
                         "'otlp' and 'none'")  # fmt: skip
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", SYSTEM)})
    provider = TracerProvider(resource=resource)  # its sampler: OTEL_TRACES_SAMPLER
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)


def current_traceparent() -> str | None:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def start_request_span(request: Any, route: str, kwargs: dict[str, Any]) -> None:
    """Start the span of an API request that is a queue operation, as the current span until
    `end_request_span`; other routes get none."""
    known = OPERATIONS.get(route)
    if known is None or trace is None or request.method != "POST":  # every one is a POST
        return
    if "HTTP_TRACEPARENT" not in request.META and not _recording():
        return  # a no-op span with no caller's context: nothing to record, nothing to pass on
    name, kind_of, kind = known
    queue = str(kwargs.get("queue", ""))
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": name,
        "messaging.operation.type": kind_of,
        "messaging.destination.name": queue,
        "server.address": str(kwargs.get("host", "")),
    }
    if "id" in kwargs:
        attributes["messaging.message.id"] = str(kwargs["id"])
    parent = propagate.extract(request.headers)
    span = trace.get_tracer("taskhoster.server").start_span(
        f"{name} {queue}", context=parent, kind=getattr(trace.SpanKind, kind),
        attributes=attributes,
    )  # fmt: skip
    token = context.attach(trace.set_span_in_context(span, parent))
    setattr(request, _ATTACHED, (span, token))


def _recording() -> bool:
    """Whether a tracer provider that may record spans is set (not OpenTelemetry's proxy, whose
    spans are no-ops until one is set, nor its no-op provider)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def end_request_span(request: Any, status: int) -> None:
    attached = getattr(request, _ATTACHED, None)
    if attached is None:
        return
    span, token = attached
    context.detach(token)
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_status(trace.Status(trace.StatusCode.ERROR))
    elif status >= 400:
        span.set_attribute("error.type", str(status))
    span.end()


def sweep_pass(changes: dict[str, int], started_ns: int) -> None:
    """A span for a pass of the sweep loop (from `started_ns`, time.time_ns(), to now) that
    changed something, its counts (timeout, requeue, cleaned, ...) as attributes: one span per
    pass, not per task, since a pass may expire thousands."""
    if trace is None or not changes:
        return
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "sweep",
        **{f"taskhoster.sweep.{name}": n for name, n in changes.items()},
    }
    tracer = trace.get_tracer("taskhoster.sweep")
    span = tracer.start_span("sweep", kind=trace.SpanKind.INTERNAL, attributes=attributes,
                             start_time=started_ns)  # fmt: skip
    span.end()
