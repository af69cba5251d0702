"""Concurrent posts with one Idempotency-Key make one task: real threads, each with its own
client and database connection, against one store directory."""

import threading

import pytest
from django.db import connection

from tests.api.conftest import HOST, QUEUE, url

THREADS = 8


def warm_the_memo(settings, client, path: str) -> None:
    """One request first, so the threads find the token, queue and roles in the process's memo
    and never touch the database: SQLite's shared in-memory test database answers concurrent
    threads with "database table is locked", which has nothing to do with what is tested here."""
    settings.TASKHOSTER_API_MEMO_SECONDS = 600
    assert client.get(path).status_code == 200


@pytest.mark.django_db(transaction=True)  # the threads' connections must see the committed rows
def test_one_key_posted_concurrently_makes_one_task(world, settings):
    from tests.api.conftest import bearer

    warm_the_memo(settings, bearer(world.tokens["alice"]), url(HOST, QUEUE))

    barrier = threading.Barrier(THREADS)
    answers: list[tuple[int, str, str | None]] = []
    errors: list[BaseException] = []

    def post() -> None:
        try:
            client = bearer(world.tokens["alice"])
            barrier.wait()
            r = client.post(url(HOST, QUEUE), {"n": 1}, format="json", HTTP_IDEMPOTENCY_KEY="once")
            answers.append((r.status_code, r.json()["id"], r.get("Idempotent-Replayed")))
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len({task_id for _, task_id, _ in answers}) == 1
    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [200] * (THREADS - 1) + [201]
    assert sum(1 for _, _, replayed in answers if replayed == "true") == THREADS - 1
    assert world.store.list_tasks(HOST, QUEUE).count == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_through_the_api_take_each_task_once(world, settings):
    from tests.api.conftest import bearer

    claim = url(HOST, QUEUE, "claim")
    settings.TASKHOSTER_API_MEMO_SECONDS = 600
    r = bearer(world.tokens["bob"]).post(claim, {"worker": "warm-up"}, format="json")
    assert r.status_code == 204  # nothing posted yet; the memo now knows bob and the queue

    tasks = {world.post(now=1_000 + i).id for i in range(20)}
    claimed: list[str] = []
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            client = bearer(world.tokens["bob"])
            while True:
                r = client.post(url(HOST, QUEUE, "claim"), {"worker": name}, format="json")
                if r.status_code == 204:
                    return
                assert r.status_code == 200
                claimed.append(r.json()["id"])
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(f"box-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(claimed) == sorted(tasks)
