"""The permission matrix: every endpoint x {own queue, other queue of the host, other host,
missing queue} x {producer, worker, operator, anonymous}.

Whatever the caller may not see answers one 404 body, byte for byte the same whether the host,
queue or task is foreign or missing; an anonymous caller is asked for a token first, everywhere.
"""

import orjson
import pytest

from queues.api.errors import NOT_FOUND_DETAIL
from queues.auth.tokens import issue_token
from queues.services import get_or_create_user, grant
from tests.api.conftest import HOST, MISSING, OTHER_HOST, OTHER_QUEUE, QUEUE, bearer, url

pytestmark = pytest.mark.django_db

NOT_FOUND = orjson.dumps({"code": "not_found", "detail": NOT_FOUND_DETAIL})
NOT_AUTHENTICATED = orjson.dumps(
    {
        "code": "not_authenticated",
        "detail": "This needs an API token: send the header 'Authorization: Bearer <token>' "
        "(an administrator creates tokens in the admin or with manage.py createtoken).",
    }
)
PLACES = {
    "own": (HOST, QUEUE),
    "other_queue": OTHER_QUEUE,
    "other_host": OTHER_HOST,
    "missing": MISSING,
}
CALLERS = {"producer": "alice", "worker": "bob", "operator": "olga", "anonymous": "anonymous"}
FENCE = {"worker": "box-1", "attempt": 1}

# endpoint: (method, path under the queue, body, the task's state it needs)
ENDPOINTS = {
    "post": ("post", "tasks", {"n": 1}, None),
    "list": ("get", "tasks", None, None),
    "read": ("get", "tasks/{id}", None, "pending"),
    "cancel": ("post", "tasks/{id}/cancel", None, "pending"),
    "retry": ("post", "tasks/{id}/retry", None, "cancelled"),
    "hasten": ("post", "tasks/{id}/hasten", None, "delayed"),
    "claim": ("post", "claim", {"worker": "box-1"}, "pending"),
    "progress": ("post", "tasks/{id}/progress", FENCE, "processing"),
    "result": ("post", "tasks/{id}/result", {**FENCE, "result": {}}, "processing"),
    "fail": ("post", "tasks/{id}/fail", FENCE, "processing"),
}

# What each caller gets on its own queue (producer's tasks are alice's own).
ON_OWN_QUEUE = {
    "post": {"producer": 201, "worker": 403, "operator": 403},
    "list": {"producer": 200, "worker": 403, "operator": 200},
    "read": {"producer": 200, "worker": 404, "operator": 200},
    "cancel": {"producer": 200, "worker": 403, "operator": 200},
    "retry": {"producer": 200, "worker": 403, "operator": 200},
    "hasten": {"producer": 403, "worker": 403, "operator": 200},
    "claim": {"producer": 403, "worker": 200, "operator": 403},
    "progress": {"producer": 403, "worker": 200, "operator": 403},
    "result": {"producer": 403, "worker": 200, "operator": 403},
    "fail": {"producer": 403, "worker": 200, "operator": 403},
}

# The role a 403 names: what the endpoint needs.
NEEDS = {"post": "producer", "list": "producer or operator", "cancel": "producer or operator",
         "retry": "producer or operator", "hasten": "operator", "claim": "worker",
         "progress": "worker", "result": "worker", "fail": "worker"}  # fmt: skip


def expected(endpoint: str, place: str, caller: str) -> int:
    if caller == "anonymous":
        return 401
    if place != "own":
        return 404
    return ON_OWN_QUEUE[endpoint][caller]


def prepare(world, place: str, state: str | None) -> str:
    """A task in the state the endpoint needs: alice's on the own queue, mallory's elsewhere."""
    if place == "missing" or state is None:
        return "0123456789abcdef"
    where = PLACES[place]
    queue = world.queues[place]
    delay = {"delay_seconds": 3600} if state == "delayed" else {}
    task = world.post(where, by="alice" if place == "own" else "mallory", **delay)
    if state == "cancelled":
        world.store.cancel(*where, task.id, settings=queue.to_settings())
    if state == "processing":
        world.claim(where, worker="box-1")
    return task.id


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_matrix(world, endpoint, place, caller):
    method, path, body, state = ENDPOINTS[endpoint]
    task_id = prepare(world, place, state)
    client = world.client(CALLERS[caller])
    r = getattr(client, method)(
        url(*PLACES[place], path.format(id=task_id)),
        body,
        format="json" if body is not None else None,
    )
    want = expected(endpoint, place, caller)
    assert r.status_code == want, r.content
    if want == 404:
        assert r.content == NOT_FOUND
    elif want == 401:
        assert r.content == NOT_AUTHENTICATED
        assert r["WWW-Authenticate"].startswith("Bearer")
    elif want == 403:
        assert r.json()["code"] == "permission_denied"
        needed = NEEDS[endpoint]
        assert r.json()["detail"].startswith(f"This needs the {needed} role on {HOST}/{QUEUE};")
        assert r.json()["detail"].endswith(f"your roles there: {caller}.")


@pytest.mark.parametrize("endpoint", ["read", "cancel", "retry"])
@pytest.mark.parametrize("caller", ["alice", "paula"])
def test_another_producers_task_is_a_missing_task(world, endpoint, caller):
    """alice and paula produce on one queue; each one's task is 404 to the other, with the
    bytes of a task id that never existed."""
    method, path, _body, state = ENDPOINTS[endpoint]
    owner = "paula" if caller == "alice" else "alice"
    task = world.post(by=owner)
    if state == "cancelled":
        world.store.cancel(HOST, QUEUE, task.id, settings=world.queues["own"].to_settings())
    client = world.client(caller)
    foreign = getattr(client, method)(url(HOST, QUEUE, path.format(id=task.id)))
    missing = getattr(client, method)(url(HOST, QUEUE, path.format(id="0123456789abcdef")))
    assert foreign.status_code == missing.status_code == 404
    assert foreign.content == missing.content == NOT_FOUND
    assert foreign.headers.items() == missing.headers.items()


@pytest.mark.parametrize(
    "name",
    [
        "..",
        ".",
        "UPPER",
        "a" * 65,
        "caf\u00e9",
        "\u0440esize",
        "-lead",
        "a%00b",
        "a%2Fb",
        "%2e%2e",
        "a..b.",
        "a\\b",
    ],
)
def test_invalid_names_answer_the_same_404_and_touch_nothing(world, name):
    world.store  # opened first: a new store makes its log directory, no request does
    before = world.written()
    alice = world.client("alice")
    calls = [
        ("get", f"/api/v1/queues/{name}/{QUEUE}/tasks"),
        ("post", f"/api/v1/queues/{name}/{QUEUE}/tasks"),
        ("post", f"/api/v1/queues/{HOST}/{name}/tasks"),
        ("get", f"/api/v1/queues/{HOST}/{QUEUE}/tasks/{name}"),
        ("post", f"/api/v1/queues/{HOST}/{QUEUE}/tasks/{name}/cancel"),
    ]
    for method, path in calls:
        r = getattr(alice, method)(path, {"n": 1}, format="json")
        assert r.status_code == 404, (path, r.content)
        assert r.content == NOT_FOUND
    assert world.written() == before


def test_an_unknown_path_under_the_api_is_the_same_404(world):
    for path in ("/api/v1/nothing", "/api/v1/queues/", "/api/v1/queues/a/b/c/d/e/f"):
        r = world.client("alice").get(path)
        assert r.status_code == 404 and r.content == NOT_FOUND


def test_staff_are_operators_of_every_queue(world):
    user = get_or_create_user("root")
    user.is_staff = True
    user.save()
    task = world.post(OTHER_HOST, by="mallory")
    staff = bearer(issue_token(user, "t")[1])
    r = staff.get(url(*OTHER_HOST, f"tasks/{task.id}"))
    assert r.status_code == 200
    assert staff.get(url(*OTHER_HOST)).json()["count"] == 1


def test_a_group_grant_counts(world, make_queue):
    from django.contrib.auth.models import Group

    from queues.models import QueueAccess

    group = Group.objects.create(name="producers")
    user = get_or_create_user("gina")
    user.groups.add(group)
    QueueAccess.objects.create(queue=world.queues["own"], group=group, role="producer")
    r = bearer(issue_token(user, "t")[1]).post(url(HOST, QUEUE), {"n": 1}, format="json")
    assert r.status_code == 201


def test_a_role_on_one_queue_gives_nothing_on_another(world):
    grant("bob", f"{OTHER_QUEUE[0]}/{OTHER_QUEUE[1]}", "producer")
    r = world.client("bob").post(url(*OTHER_QUEUE), {"n": 1}, format="json")
    assert r.status_code == 201
    r = world.client("bob").post(url(*OTHER_HOST), {"n": 1}, format="json")
    assert r.status_code == 404 and r.content == NOT_FOUND
