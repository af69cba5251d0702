"""OpenTelemetry spans, checked with the SDK's in-memory exporter: the server's post, claim and
result spans (messaging conventions, children of the caller's span), the post's context kept
on the task (both stores), and the worker's span for running it linked to the post's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from queues import stores
from queues.auth.tokens import issue_token
from queues.models import QueueAccess
from queues.store import trace_context
from taskhoster import tracing as client_tracing

ROOT = Path(__file__).resolve().parent.parent
HOST = "task.example.com"
EXPORTER = InMemorySpanExporter()


def _provider() -> None:
    """One provider for the process (OpenTelemetry lets it be set once)."""
    if type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider":
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)


_provider()


@pytest.fixture
def spans():
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def api_client(queue, who: str, role: str) -> Client:
    from django.contrib.auth.models import User

    user = User.objects.get_or_create(username=who)[0]
    QueueAccess.objects.create(queue=queue, user=user, role=role)
    _, token = issue_token(user, "t")
    return Client(headers={"Authorization": f"Bearer {token}"})


def traced_headers() -> dict[str, str]:
    headers: dict[str, str] = {}
    client_tracing.inject(headers)  # what taskhoster.client sends from inside a span
    return headers


def by_name(exporter: InMemorySpanExporter, name: str):
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


@pytest.mark.django_db
@pytest.mark.parametrize("store_kind", ["files", "postgres"], indirect=True)
def test_post_claim_and_run_are_linked_through_the_stored_context(make_queue, store_kind, spans):
    queue = make_queue(HOST, "resize", store=store_kind)
    paul = api_client(queue, "paul", "producer")
    wendy = api_client(queue, "wendy", "worker")
    base = f"/api/v1/queues/{HOST}/resize"
    tracer = trace.get_tracer("the producer's application")
    with tracer.start_as_current_span("make thumbnails") as producer:
        posted = paul.post(f"{base}/tasks", {"n": 1}, content_type="application/json",
                           headers=traced_headers())  # fmt: skip
    assert posted.status_code == 201, posted.content
    task_id = posted.json()["id"]

    post = by_name(spans, "post resize")
    assert post.kind == trace.SpanKind.PRODUCER
    assert post.parent is not None
    assert post.parent.span_id == producer.get_span_context().span_id  # a child of the caller's
    assert post.context.trace_id == producer.get_span_context().trace_id
    assert post.attributes["messaging.system"] == "taskhoster"
    assert post.attributes["messaging.operation.name"] == "post"
    assert post.attributes["messaging.destination.name"] == "resize"

    # the store kept the post span's context on the record
    stored = stores.of(HOST, "resize").read(HOST, "resize", task_id).traceparent
    assert stored.startswith(f"00-{post.context.trace_id:032x}-{post.context.span_id:016x}-")

    claimed = wendy.post(f"{base}/claim", {"worker": "box-1"}, content_type="application/json")
    assert claimed.status_code == 200, claimed.content
    task = claimed.json()
    assert task["traceparent"] == stored  # the worker gets it with the task
    claim = by_name(spans, "claim resize")
    assert claim.attributes["messaging.operation.name"] == "claim"
    assert claim.parent is None  # an untraced worker's claim starts a trace of its own

    with client_tracing.processing(HOST, "resize", task, "box-1"):
        pass
    run = by_name(spans, "process resize")
    assert run.kind == trace.SpanKind.CONSUMER
    assert [(link.context.trace_id, link.context.span_id) for link in run.links] == [
        (post.context.trace_id, post.context.span_id)
    ]
    assert run.attributes["messaging.message.id"] == task_id

    done = wendy.post(f"{base}/tasks/{task_id}/result",
                      {"worker": "box-1", "attempt": task["attempts"], "result": {"ok": 1}},
                      content_type="application/json")  # fmt: skip
    assert done.status_code == 200, done.content
    result = by_name(spans, "result resize")
    assert result.attributes["messaging.operation.type"] == "settle"
    assert result.attributes["messaging.message.id"] == task_id


@pytest.mark.django_db
def test_a_refused_post_is_a_span_with_its_status_and_stores_nothing(make_queue, spans):
    queue = make_queue(HOST, "resize")
    paul = api_client(queue, "paul", "producer")
    refused = paul.post(
        f"/api/v1/queues/{HOST}/resize/tasks", "[1, 2", content_type="application/json"
    )
    assert refused.status_code == 400
    post = by_name(spans, "post resize")
    assert post.attributes["http.response.status_code"] == 400
    assert post.attributes["error.type"] == "400"


@pytest.mark.django_db
def test_other_requests_have_no_span(make_queue, spans):
    queue = make_queue(HOST, "resize")
    paul = api_client(queue, "paul", "producer")
    assert paul.get(f"/api/v1/queues/{HOST}/resize/tasks").status_code == 200
    assert spans.get_finished_spans() == ()


def test_only_a_well_formed_traceparent_is_stamped():
    trace_context.CURRENT[:] = [lambda: "00-" + "a" * 32 + "-" + "b" * 16 + "-01"]
    try:
        assert trace_context.current() == "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
        for bad in ("", "00-" + "0" * 32 + "-" + "b" * 16 + "-01", "garbage", "00-abc-def-01",
                    "00-" + "A" * 32 + "-" + "b" * 16 + "-01"):  # fmt: skip
            trace_context.CURRENT[:] = [lambda bad=bad: bad]
            assert trace_context.current() is None, bad
    finally:
        from queues.metrics import tracing

        trace_context.CURRENT[:] = [tracing.current_traceparent]


def test_a_worker_span_without_a_stored_context_has_no_link(spans):
    with client_tracing.processing(HOST, "resize", {"id": "f" * 16, "attempts": 1}, "w"):
        pass
    with client_tracing.processing(HOST, "resize", {"id": "e" * 16, "traceparent": "junk"}, "w"):
        pass
    assert [s.links for s in spans.get_finished_spans()] == [(), ()]


def test_nothing_imports_opentelemetry_without_it(tmp_path):
    """Without the extra, the client, the worker loop and the server's tracing import, and do
    nothing (opentelemetry made unimportable in a fresh process)."""
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import django, os\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'taskhoster_site.settings'\n"
        "django.setup()\n"
        "from taskhoster import client, worker, tracing\n"
        "from queues.metrics import tracing as server_tracing\n"
        "from queues.store import trace_context\n"
        "headers = {}; tracing.inject(headers)\n"
        "with tracing.processing('h', 'q', {'id': 'x'}, 'w'): pass\n"
        "import json; print(json.dumps([headers, server_tracing.configure(),"
        " len(trace_context.CURRENT)]))\n"
    )
    assert _printed_by(tmp_path, code) == [{}, False, 0]


def _printed_by(tmp_path: Path, code: str) -> Any:
    """The last line `code` printed, as JSON, run in a fresh process on a site of its own."""
    env = {"PATH": "/usr/bin:/bin", "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_server_follows_the_callers_context_header():
    """propagate.extract of a request's headers, as the middleware reads them."""
    parent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    got = trace.get_current_span(propagate.extract({"traceparent": parent})).get_span_context()
    assert (got.trace_id, got.span_id) == (int("1" * 32, 16), int("2" * 16, 16))


def _configured(tmp_path: Path, exporter: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import django, os\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'taskhoster_site.settings'\n"
        "django.setup()\n"
        "from opentelemetry import trace\n"
        "from queues.metrics import tracing\n"
        "assert tracing.configure()\n"
        "with trace.get_tracer('t').start_as_current_span('from OTEL_* alone'): pass\n"
        "trace.get_tracer_provider().shutdown()\n"
    )
    env = {"PATH": "/usr/bin:/bin", "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "OTEL_TRACES_EXPORTER": exporter, "OTEL_SERVICE_NAME": "tasks-east"}  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def test_the_server_sets_up_the_sdk_from_the_otel_variables(tmp_path):
    done = _configured(tmp_path, "console")
    assert done.returncode == 0, done.stderr
    assert '"name": "from OTEL_* alone"' in done.stdout
    assert '"service.name": "tasks-east"' in done.stdout


def test_an_unknown_exporter_is_refused_by_name(tmp_path):
    done = _configured(tmp_path, "carrier-pigeon")
    assert done.returncode != 0
    assert "OTEL_TRACES_EXPORTER='carrier-pigeon'" in done.stderr


def test_without_a_provider_a_request_without_a_context_starts_no_span(tmp_path):
    """No provider set (a fresh process): a span would be a no-op with nothing to pass on, so
    none is started; a caller's traceparent is still followed (a post stamps it on its task)."""
    code = (
        "import django, os, json\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'taskhoster_site.settings'\n"
        "django.setup()\n"
        "from queues.metrics import tracing\n"
        "class Request:\n"
        "    method = 'POST'\n"
        "    def __init__(self, meta):\n"
        "        self.META, self.headers = meta, {k[5:].lower(): v for k, v in meta.items()}\n"
        "bare = Request({})\n"
        "parent = '00-' + '1' * 32 + '-' + '2' * 16 + '-01'\n"
        "followed = Request({'HTTP_TRACEPARENT': parent})\n"
        "route, kwargs = 'queues:api:tasks', {'host': 'h', 'queue': 'q'}\n"
        "tracing.start_request_span(bare, route, kwargs)\n"
        "tracing.start_request_span(followed, route, kwargs)\n"
        "passed_on = tracing.current_traceparent()\n"
        "tracing.end_request_span(followed, 201)\n"
        "print(json.dumps([hasattr(bare, tracing._ATTACHED), passed_on]))\n"
    )
    bare_has_a_span, passed_on = _printed_by(tmp_path, code)
    assert bare_has_a_span is False
    assert passed_on == "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
