"""GET /api/v1/: links to the docs and the schema, and the queues the caller can use."""

import pytest

from queues.services import get_or_create_user
from tests.api.conftest import HOST, OTHER_HOST, OTHER_QUEUE, QUEUE

pytestmark = pytest.mark.django_db
ROOT = "/api/v1/"
BASE = "http://testserver/api/v1"


def test_a_worker_sees_its_queue_with_the_links_its_role_uses(world):
    r = world.client("bob").get(ROOT)
    assert r.status_code == 200
    assert r.json() == {
        "docs": f"{BASE}/docs/",
        "schema": f"{BASE}/schema/",
        "user": "bob",
        "queues": [
            {
                "host": HOST,
                "queue": QUEUE,
                "roles": ["worker"],
                "paused": False,
                "tasks": f"{BASE}/queues/{HOST}/{QUEUE}/tasks",
                "stats": f"{BASE}/queues/{HOST}/{QUEUE}/stats",
                "claim": f"{BASE}/queues/{HOST}/{QUEUE}/claim",
            }
        ],
    }


def test_the_list_holds_only_queues_the_caller_has_a_role_on(world):
    mine = {(q["host"], q["queue"]) for q in world.client("mallory").get(ROOT).json()["queues"]}
    assert mine == {OTHER_QUEUE, OTHER_HOST}
    [olga] = world.client("olga").get(ROOT).json()["queues"]
    assert olga["roles"] == ["operator"] and olga["events"].endswith("/events")
    assert "claim" not in olga


def test_staff_see_every_queue(world):
    user = get_or_create_user("alice")
    user.is_staff = True
    user.save()
    queues = world.client("alice").get(ROOT).json()["queues"]
    assert len(queues) == 3
    assert queues[0]["roles"] == ["operator", "producer", "worker"]


def test_anonymous_callers_get_the_links_and_no_queues(world):
    world.queues["own"].public_post = True  # even a queue anyone may post to stays unlisted
    world.queues["own"].save()
    r = world.client("anonymous").get(ROOT)
    assert r.status_code == 200
    body = r.json()
    assert (body["docs"], body["schema"], body["user"], body["queues"]) == (
        f"{BASE}/docs/", f"{BASE}/schema/", None, [])  # fmt: skip
    assert "Authorization: Bearer <token>" in body["detail"]


def test_the_links_lead_somewhere(world):
    client = world.client("bob")
    body = client.get(ROOT).json()
    assert client.get(body["schema"]).status_code == 200
    assert client.get(body["docs"]).status_code == 200
    assert client.get(body["queues"][0]["stats"]).status_code == 200


def test_a_bad_token_on_the_root_is_still_401(world):
    from tests.api.conftest import bearer

    r = bearer("th_00000000_" + "x" * 43).get(ROOT)
    assert (r.status_code, r.json()["code"]) == (401, "not_authenticated")
