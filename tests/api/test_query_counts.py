"""What each hot endpoint costs the database, pinned so it cannot creep back.

Before queues.api.memo every request paid three queries (token, queue, roles); within the
memo's bound a repeated caller pays none. The memo must never outlive a change saved in this
process, and never holds more than its bound otherwise.
"""

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queues.api import memo
from queues.auth.tokens import revoke_token
from queues.models import ApiToken, QueueAccess

from .conftest import HOST, QUEUE, World, url

# Token (with its user), queue (with its host), the caller's roles. The token's last-used
# write comes on top at most once a minute, so it is made before counting.
COLD = 3
WARM = 0


Request = Callable[[], Any]


def _claimed(world: World) -> dict[str, Any]:
    world.post()
    bob = world.client("bob")
    return bob.post(url(HOST, QUEUE, "claim"), {"worker": "box-1"}, format="json").json()


def _post(world: World) -> Request:
    return lambda: world.client("alice").post(url(HOST, QUEUE), {"n": 1}, format="json")


def _claim(world: World) -> Request:
    world.post()
    bob = world.client("bob")
    return lambda: bob.post(url(HOST, QUEUE, "claim"), {"worker": "box-1"}, format="json")


def _result(world: World) -> Request:
    task, bob = _claimed(world), world.client("bob")
    body = {"worker": "box-1", "attempt": task["attempts"], "result": {"ok": True}}
    return lambda: bob.post(url(HOST, QUEUE, f"tasks/{task['id']}/result"), body, format="json")


def _progress(world: World) -> Request:
    task, bob = _claimed(world), world.client("bob")
    body = {"worker": "box-1", "attempt": task["attempts"], "progress": 1}
    return lambda: bob.post(url(HOST, QUEUE, f"tasks/{task['id']}/progress"), body, format="json")


def _status(world: World) -> Request:
    task = world.post()
    return lambda: world.client("alice").get(url(HOST, QUEUE, f"tasks/{task.id}"))


# Each prepares its task outside the count and returns the request to count.
ENDPOINTS: dict[str, Callable[[World], Request]] = {
    "post": _post,
    "claim": _claim,
    "result": _result,
    "progress": _progress,
    "status": _status,
}


def _count(call: Request) -> tuple[int, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = call()
    assert response.status_code in (200, 201), response.content
    return len(captured), [q["sql"] for q in captured.captured_queries]


@pytest.fixture
def warm_tokens(world: World) -> World:
    world.client("alice").get(url(HOST, QUEUE, "tasks"))  # last-used written for both callers
    world.client("bob").post(url(HOST, QUEUE, "claim"), {"worker": "box-1"}, format="json")
    return world


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_first_request_pays_token_queue_and_roles(warm_tokens: World, endpoint: str) -> None:
    request = ENDPOINTS[endpoint](warm_tokens)
    memo.forget_all()
    count, sql = _count(request)
    assert count == COLD, sql


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_repeated_request_pays_no_query(warm_tokens: World, endpoint: str) -> None:
    ENDPOINTS[endpoint](warm_tokens)()
    count, sql = _count(ENDPOINTS[endpoint](warm_tokens))
    assert count == WARM, sql


def test_a_revoked_token_is_refused_at_once(world: World) -> None:
    assert _post(world)().status_code == 201
    revoke_token(ApiToken.objects.get(user__username="alice"))
    assert _post(world)().status_code == 401


def test_a_removed_grant_is_refused_at_once(world: World) -> None:
    assert _post(world)().status_code == 201
    QueueAccess.objects.filter(user__username="alice").delete()
    assert _post(world)().status_code == 404


def test_a_deactivated_user_is_refused_at_once(world: World) -> None:
    assert _post(world)().status_code == 201
    user = ApiToken.objects.get(user__username="alice").user
    user.is_active = False
    user.save()
    assert _post(world)().status_code == 401


def test_a_changed_queue_setting_applies_at_once(world: World) -> None:
    assert _post(world)().status_code == 201
    queue = world.queues["own"]
    queue.max_item_bytes = 2
    queue.save()
    assert _post(world)().status_code == 413


def test_a_bulk_update_sends_no_signal_so_the_bound_holds(world: World, settings) -> None:
    """The admin's revoke action is an update(): within the bound the memo still knows the
    token, so the bound is the promise; with the memo off it takes effect at once."""
    assert _post(world)().status_code == 201
    ApiToken.objects.filter(user__username="alice").update(revoked_at="2000-01-01T00:00Z")
    assert _post(world)().status_code == 201
    memo.forget_all()
    settings.TASKHOSTER_API_MEMO_SECONDS = 0
    assert _post(world)().status_code == 401


def test_an_entry_lasts_its_bound_and_no_longer(settings) -> None:
    settings.TASKHOSTER_API_MEMO_SECONDS = 2
    store = memo.Memo()
    store.put("k", "v", now=100.0)
    assert store.get("k", now=101.9) == "v"
    assert store.get("k", now=102.0) is None


def test_an_expired_token_is_refused_though_memoized(world: World) -> None:
    assert _post(world)().status_code == 201
    record = memo.tokens.get(next(iter(memo.tokens._entries)))
    record.expires_at = record.created_at  # as if its expiry had passed since it was memoized
    assert _post(world)().status_code == 401
