"""Flow control through the API: concurrencyKey on posts and batch entries, a claim held back
by the rate limit (204, Retry-After, Queue-Limited: rate), by maxProcessing or by a key, and
the status view's heldBy."""

import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
CLAIM = url(HOST, QUEUE, "claim")


def _limit(world, **fields):
    queue = world.queues["own"]
    for name, value in fields.items():
        setattr(queue, name, value)
    queue.save()


def claim(world, **body):
    return world.client("bob").post(CLAIM, {"worker": "box-1", **body}, format="json")


def test_a_post_keeps_its_concurrency_key(world):
    r = world.client("alice").post(
        url(HOST, QUEUE) + "?concurrencyKey=customer-7", {"n": 1}, format="json"
    )
    assert r.status_code == 201 and r.json()["concurrencyKey"] == "customer-7"
    assert claim(world).json()["concurrencyKey"] == "customer-7"


@pytest.mark.parametrize("key", ["", "x" * 201])
def test_a_bad_concurrency_key_is_400_invalid_request_and_nothing_is_written(world, key):
    before = world.written()
    r = world.client("alice").post(
        url(HOST, QUEUE) + f"?concurrencyKey={key}", {"n": 1}, format="json"
    )
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")
    assert "concurrencyKey" in r.json()["detail"]
    assert world.written() == before


def test_a_batch_entry_takes_a_concurrency_key_and_a_bad_one_names_its_index(world):
    batch = url(HOST, QUEUE, "tasks/batch")
    good = {"tasks": [{"item": {"n": 1}, "concurrencyKey": "k"}, {"item": {"n": 2}}]}
    r = world.client("alice").post(batch, good, format="json")
    assert r.status_code == 201
    assert [t.get("concurrencyKey") for t in r.json()["tasks"]] == ["k", None]
    before = world.written()
    bad = {"tasks": [{"item": {"n": 1}}, {"item": {"n": 2}, "concurrencyKey": 7}]}
    r = world.client("alice").post(batch, bad, format="json")
    assert (r.status_code, r.json()["code"], r.json()["index"]) == (400, "invalid_request", 1)
    assert world.written() == before


def test_a_claim_over_the_rate_limit_is_204_with_retry_after_and_says_so(world):
    _limit(world, rate_count=1, rate_seconds=3600)
    world.post()
    world.post()
    assert claim(world).status_code == 200
    r = claim(world)
    assert r.status_code == 204
    assert r["Queue-Limited"] == "rate"
    assert 3500 <= int(r["Retry-After"]) <= 3600


def test_a_claim_at_max_processing_is_204_and_says_so(world):
    _limit(world, max_processing=1)
    world.post()
    world.post()
    assert claim(world).status_code == 200
    r = claim(world)
    assert (r.status_code, r["Queue-Limited"]) == (204, "maxProcessing")
    assert "Retry-After" not in r


def test_held_by_in_the_status_view(world):
    _limit(world, max_per_key=1)
    world.post(concurrency_key="k")
    waiting = world.post(concurrency_key="k")
    free = world.post()
    assert claim(world).status_code == 200
    read = world.client("alice").get(url(HOST, QUEUE) + f"/{waiting.id}").json()
    assert read["heldBy"] == "key"
    assert "heldBy" not in world.client("alice").get(url(HOST, QUEUE) + f"/{free.id}").json()
    r = claim(world)
    assert r.json()["id"] == free.id  # claimed past the held one
    r = claim(world)
    assert (r.status_code, r["Queue-Limited"]) == (204, "key")
