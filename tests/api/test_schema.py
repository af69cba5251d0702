"""The served OpenAPI schema, its offline docs page, and schemathesis against the schema with a
producer's and a worker's token: no 5xx, and every answer conforms to the schema."""

import itertools
import re

import orjson
import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from tests.api.conftest import HOST, QUEUE

pytestmark = pytest.mark.django_db
SCHEMA_URL = "/api/v1/schema/?format=json"

API_MD = {
    "/api/v1/": {"get"},
    "/api/v1/queues/{host}/{queue}/tasks": {"get", "post"},
    "/api/v1/queues/{host}/{queue}/tasks/{id}": {"get"},
    "/api/v1/queues/{host}/{queue}/tasks/{id}/cancel": {"post"},
    "/api/v1/queues/{host}/{queue}/tasks/{id}/retry": {"post"},
    "/api/v1/queues/{host}/{queue}/tasks/{id}/hasten": {"post"},
    "/api/v1/queues/{host}/{queue}/claim": {"post"},
    "/api/v1/queues/{host}/{queue}/stats": {"get"},
    "/api/v1/queues/{host}/{queue}/groups/{group}": {"get"},
    "/api/v1/queues/{host}/{queue}/tasks/{id}/progress": {"post"},
    "/api/v1/queues/{host}/{queue}/tasks/{id}/result": {"post"},
    "/api/v1/queues/{host}/{queue}/tasks/{id}/fail": {"post"},
    "/api/v1/queues/{host}/{queue}/tasks/batch": {"post"},
    "/api/v1/queues/{host}/{queue}/finish": {"post"},
}


ALWAYS_REFUSED = {"400", "401", "403", "404", "405"}


def served_schema(client) -> dict:
    r = client.get(SCHEMA_URL)
    assert r.status_code == 200
    return orjson.loads(r.content)


def test_the_schema_describes_every_endpoint_body_and_error(client):
    schema = served_schema(client)
    for path, methods in API_MD.items():
        assert methods <= set(schema["paths"][path]), path
        for method in methods:
            operation = schema["paths"][path][method]
            # The root answers every caller (no queue, so no 403 or 404 to give).
            refusals = {"400", "401", "405"} if path == "/api/v1/" else ALWAYS_REFUSED
            assert refusals <= set(operation["responses"]), path
            assert operation["security"], path
    events = schema["paths"]["/api/v1/queues/{host}/{queue}/events"]["get"]
    assert "text/event-stream" in events["responses"]["200"]["content"]
    claim = schema["paths"]["/api/v1/queues/{host}/{queue}/claim"]["post"]
    assert {"200", "204"} <= set(claim["responses"])
    assert {"Queue-Paused", "Retry-After"} <= set(claim["responses"]["204"]["headers"])
    post = schema["paths"]["/api/v1/queues/{host}/{queue}/tasks"]["post"]
    assert {"201", "200", "413", "415", "422", "429"} <= set(post["responses"])
    assert "Location" in post["responses"]["201"]["headers"]
    assert "Idempotent-Replayed" in post["responses"]["200"]["headers"]
    stats = schema["paths"]["/api/v1/queues/{host}/{queue}/stats"]["get"]
    assert "paused" in components_of(schema, stats["responses"]["200"])["properties"]
    components = schema["components"]
    assert components["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token: th_…",
    }
    assert set(components["schemas"]["Error"]["properties"]) == {"code", "detail", "index"}
    batch = schema["paths"]["/api/v1/queues/{host}/{queue}/tasks/batch"]["post"]
    assert {"201", "413", "422", "429"} <= set(batch["responses"])
    finish = schema["paths"]["/api/v1/queues/{host}/{queue}/finish"]["post"]
    assert "outcomes" in components_of(schema, finish["responses"]["200"])["properties"]


def test_the_schema_documents_the_replay_header_and_the_requeue_time(client):
    schema = served_schema(client)
    for verb in ("result", "fail"):
        answer = schema["paths"][f"/api/v1/queues/{{host}}/{{queue}}/tasks/{{id}}/{verb}"]["post"]
        headers = answer["responses"]["200"]["headers"]
        assert "Taskhoster-Outcome-Replayed" in headers, verb
    fields = schema["components"]["schemas"]["TaskStatus"]["properties"]
    assert {"postedAt", "requeuedAt"} <= set(fields)


def components_of(schema: dict, response: dict) -> dict:
    ref = response["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]


def request_component(schema: dict, operation: dict) -> dict:
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]


@pytest.mark.parametrize("path", ["tasks/{id}/result", "tasks/{id}/fail", "finish"])
def test_a_report_may_claim_the_next_task_and_the_schema_says_how(client, path):
    schema = served_schema(client)
    operation = schema["paths"][f"/api/v1/queues/{{host}}/{{queue}}/{path}"]["post"]
    asked = request_component(schema, operation)["properties"]["next"]
    spec = schema["components"]["schemas"][asked["allOf"][0]["$ref"].rsplit("/", 1)[-1]]
    assert set(spec["properties"]) == {"max", "wait", "lease"}
    answered = components_of(schema, operation["responses"]["200"])["properties"]["next"]
    assert answered["type"] == "array" and answered["items"]["$ref"].endswith("/TaskRecord")


def test_the_schema_is_valid_openapi(client):
    from drf_spectacular.validation import validate_schema

    validate_schema(served_schema(client))


def test_the_docs_page_and_its_assets_load_with_no_external_url(client):
    page = client.get("/api/v1/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "script-src 'self'" in page["Content-Security-Policy"]
    # No inline script: every <script> has a src and an empty body, so the CSP holds.
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    assert re.findall(r"<script[^>]*>\s*(?!</script>)\S", html) == []
    urls = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert len(urls) >= 4
    for asset in urls:
        assert not re.match(r"^(?:[a-z]+:)?//", asset), asset  # same origin only
        r = client.get(asset.replace("&amp;", "&"))
        assert r.status_code == 200, asset
        body = b"".join(r.streaming_content) if r.streaming else r.content
        assert body
    script = client.get("/api/v1/docs/?script=").content.decode()
    assert "http://" not in script and "https://" not in script
    assert "validatorUrl" in script  # set to null: nothing is sent to validator.swagger.io


# --- schemathesis ---------------------------------------------------------------------------


@pytest.fixture
def django_wsgi():
    """Django's WSGI app as schemathesis calls it, inside the test's database transaction:
    like Django's test client, keep the request signals from closing that connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield WSGIHandler()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(django_wsgi, world):
    schema = schemathesis.openapi.from_wsgi(SCHEMA_URL, django_wsgi)
    return schema.exclude(path_regex="events")  # a stream that never ends is not fuzzed here


CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


def aim(case, world, turn: int) -> None:
    """Point the cases at the real queue and a task claimed by box-1, so they reach the store
    instead of stopping at the 404; every other case also names the lease's worker and attempt,
    so progress, result and fail get past the fence. Never wait: a fuzzed 60 s only slows."""
    world.post()  # something to claim
    if case.path_parameters is not None:
        case.path_parameters["host"], case.path_parameters["queue"] = HOST, QUEUE
        if "id" in case.path_parameters:
            claimed = world.claim(worker="box-1")
            case.path_parameters["id"] = claimed.id
            if isinstance(case.body, dict) and turn % 2 == 0:
                case.body.update(worker="box-1", attempt=claimed.attempts)
    if case.query and "wait" in case.query:
        case.query["wait"] = 0
    if isinstance(case.body, dict) and isinstance(case.body.get("wait"), int | float):
        case.body["wait"] = 0


FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_schemathesis(api_schema, world, who):
    """Every operation, fuzzed with a producer's token and then a worker's. (schemathesis's own
    pytest integration does not run on pytest 9 yet, so the loop over operations is ours.)"""
    headers = {"Authorization": f"Bearer {world.tokens[who]}"}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) == sum(len(methods) for methods in API_MD.values())
    turns = itertools.count()
    for operation in operations:

        @FUZZ
        @given(case=operation.as_strategy())
        def fuzz(case):
            aim(case, world, next(turns))
            case.call_and_validate(headers=headers, checks=CHECKS)

        fuzz()
