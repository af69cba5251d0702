"""Why is my task not running? A pending task's read says it in one line (`why`), from what
its store knows: the queue paused, a dependency, a backoff or delay, a flow limit, the tasks
ahead of it, or no worker claiming (issue 36, item 10). Both stores."""

from __future__ import annotations

import re
import time

import pytest

from tests.api.conftest import HOST, QUEUE, url

pytestmark = pytest.mark.django_db
MINUTE = 60_000


def why(world, task_id: str) -> str | None:
    read = world.client("alice").get(url(HOST, QUEUE) + f"/{task_id}")
    assert read.status_code == 200
    return read.json().get("why")


def _set(world, **fields) -> None:
    queue = world.queues["own"]
    for name, value in fields.items():
        setattr(queue, name, value)
    queue.save()


def test_a_task_next_in_line_says_the_next_claim_takes_it_and_an_ended_one_says_nothing(world):
    task = world.post()
    assert why(world, task.id) == "Next in line: the next claim from this queue takes it."
    world.claim()
    assert why(world, task.id) is None  # running: nothing to explain


def test_tasks_ahead_are_counted_in_the_claims_order(world):
    first, second = world.post(), world.post()
    mine = world.post()
    urgent = world.post(priority=5)  # posted last, claimed first
    world.post(delay_seconds=3600)  # not claimable: not ahead
    assert why(world, mine.id) == "3 claimable tasks ahead of it in the queue."
    assert why(world, second.id) == "2 claimable tasks ahead of it in the queue."
    assert why(world, first.id) == "1 claimable task ahead of it in the queue."
    assert why(world, urgent.id).startswith("Next in line")


def test_a_task_first_in_line_for_minutes_says_no_worker_claimed(world):
    task = world.post(now=int(time.time() * 1000) - 3 * MINUTE)
    # the read's clock is the real one: a loaded machine may take a second or more to answer
    assert re.fullmatch(
        r"Next in line, claimable for 3 min( \d+ s)?: no worker has claimed from this queue "
        r"since\.",
        why(world, task.id),
    )


def test_a_paused_queue_says_so_first(world):
    task = world.post(delay_seconds=60)
    _set(world, paused=True)
    assert why(world, task.id).startswith("The queue is paused")


def test_a_delayed_post_and_a_backoff_say_until_when(world):
    delayed = world.post(delay_seconds=120)
    assert re.fullmatch(
        r"Delayed by its post: claimable in (2 min|1 min \d+ s) \(\d\d:\d\d:\d\d UTC\)\.",
        why(world, delayed.id),
    )
    _set(world, max_attempts=3, backoff_seconds=30)
    failing = world.post()
    world.claim()
    world.store.fail(HOST, QUEUE, failing.id, settings=world.queues["own"].to_settings(),
                     worker="box-1", attempt=1, result={"error": "boom"}, retry=True)  # fmt: skip
    said = why(world, failing.id)
    assert said.startswith("In its backoff after attempt 1 failed: claimable in ")
    assert said.endswith(" UTC).")


def test_a_waiting_task_names_its_dependency_and_its_state(world):
    first = world.post()
    world.claim()
    waiting = world.post(after=[f"{QUEUE}/{first.id}"])
    assert why(world, waiting.id) == f"Waiting for {QUEUE}/{first.id} (processing) to finish."


def test_flow_limits_say_what_holds_the_task(world):
    _set(world, max_processing=1)
    world.post()
    held = world.post()
    world.claim()
    assert why(world, held.id) == "Held by the queue's maxProcessing: 1 of 1 are running."


def test_the_rate_limit_says_when_the_next_claim_is_allowed(world):
    _set(world, rate_count=1, rate_seconds=3600)
    world.post()
    held = world.post()
    world.claim()
    said = why(world, held.id)
    assert re.fullmatch(
        r"Held by the queue's rate limit: the next claim is allowed in (1 hour|59 min( \d+ s)?)\.",
        said,
    )
