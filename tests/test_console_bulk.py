"""The bulk actions act on exactly the set the operator confirmed: a task that entered the
filter's status after the count is left alone, and the report adds up to the count (done,
cancel requested, refused, no longer matching)."""

from __future__ import annotations

import pytest

from queues import stores
from tests.test_console import client_for
from tests.test_queue_page import BULK, HOST, NAME, T0, URL, dict_of, each_store, hidden_fields
from tests.test_queue_page import resize as resize  # the fixture

pytestmark = pytest.mark.django_db


def post_and_claim(queue, n: int, *, now: int = T0) -> list:
    store, settings = stores.of(HOST, NAME), queue.to_settings()
    for i in range(n):
        store.post(HOST, NAME, {"n": i}, settings=settings, posted_by="alice", now=now + i)
    return store.claim(HOST, NAME, settings=settings, worker="w", max_tasks=n, now=now + 50)


def fail(queue, task, *, now: int | None) -> None:
    stores.of(HOST, NAME).fail(HOST, NAME, task.id, settings=queue.to_settings(), worker="w",
                               attempt=1, now=now)  # fmt: skip


def confirmed_run(client, form: dict, before_confirming=None) -> str:
    """Count, let `before_confirming` change the queue, then confirm and walk to the end;
    the report the queue page shows."""
    page = client.post(BULK, form).content.decode()
    if before_confirming is not None:
        before_confirming()
    fields = hidden_fields(page)
    while True:
        answer = client.post(BULK, dict_of(fields))
        if answer.status_code == 302:
            return client.get(answer["Location"]).content.decode()
        fields = hidden_fields(answer.content.decode())


def status_of(task) -> str:
    return stores.of(HOST, NAME).read(HOST, NAME, task.id).status.value


@each_store
def test_a_task_that_failed_after_the_count_is_not_retried(resize):
    tasks = post_and_claim(resize, 4)
    for task in (tasks[0], tasks[1], tasks[3]):
        fail(resize, task, now=T0 + 100)
    client = client_for("olga", role="operator", queue=resize)
    report = confirmed_run(client, {"do": "retry:filter", "status": "failed"},
                           lambda: fail(resize, tasks[2], now=None))  # fmt: skip
    assert "retry: 3 done, 0 refused." in report
    assert [status_of(t) for t in tasks] == ["pending", "pending", "failed", "pending"]


@each_store
def test_counted_tasks_that_left_the_status_are_reported_as_no_longer_matching(resize):
    tasks = post_and_claim(resize, 3)
    for task in tasks:
        fail(resize, task, now=T0 + 100)
    client = client_for("olga", role="operator", queue=resize)
    settings = resize.to_settings()
    report = confirmed_run(
        client,
        {"do": "retry:filter", "status": "failed"},
        lambda: stores.of(HOST, NAME).retry(HOST, NAME, tasks[1].id, settings=settings),
    )
    assert "retry: 2 done, 0 refused, 1 no longer matching, of 3 counted." in report


@each_store
def test_a_task_claimed_after_the_count_is_not_requeued(resize):
    store, settings = stores.of(HOST, NAME), resize.to_settings()
    early = store.post(HOST, NAME, {"n": 0}, settings=settings, posted_by="alice", now=T0).task
    store.post(HOST, NAME, {"n": 1}, settings=settings, posted_by="alice", now=T0 + 1,
               priority=5)  # fmt: skip
    [counted] = store.claim(HOST, NAME, settings=settings, worker="w", now=T0 + 50)
    client = client_for("olga", role="operator", queue=resize)
    report = confirmed_run(
        client,
        {"do": "requeue:filter", "status": "processing"},
        lambda: stores.of(HOST, NAME).claim(HOST, NAME, settings=settings, worker="w"),
    )
    assert "requeue: 1 done, 0 refused." in report
    assert status_of(counted) == "pending" and status_of(early) == "processing"


@each_store
def test_a_cancel_of_running_tasks_is_reported_as_requested_not_done(resize):
    post_and_claim(resize, 2)
    client = client_for("olga", role="operator", queue=resize)
    report = confirmed_run(client, {"do": "cancel:filter", "status": "processing"})
    assert "cancel: 0 done, 2 cancel requested (still running), 0 refused, of 2 counted." in report


def test_ticked_running_tasks_cancelled_are_reported_as_requested(resize):
    tasks = post_and_claim(resize, 2)
    client = client_for("olga", role="operator", queue=resize)
    ids = [t.id for t in tasks]
    page = client.post(BULK, {"do": "cancel:selected", "ids": ids}).content.decode()
    answer = client.post(BULK, dict_of(hidden_fields(page)), follow=True)
    assert answer.redirect_chain[-1][0] == URL
    assert "cancel: 0 done, 2 cancel requested (still running), 0 refused, of 2 counted." in (
        answer.content.decode()
    )


@each_store
def test_a_ticked_chain_is_retried_from_its_first_task_whatever_the_order(resize):
    store, settings = stores.of(HOST, NAME), resize.to_settings()
    a = store.post(HOST, NAME, {"n": 0}, settings=settings, posted_by="alice", now=T0).task
    b = store.post(HOST, NAME, {"n": 1}, settings=settings, posted_by="alice", now=T0 + 1,
                   after=[a.id]).task  # fmt: skip
    c = store.post(HOST, NAME, {"n": 2}, settings=settings, posted_by="alice", now=T0 + 2,
                   after=[b.id]).task  # fmt: skip
    lone = store.post(HOST, NAME, {"n": 3}, settings=settings, posted_by="alice", now=T0 + 3,
                      after=[a.id]).task  # fmt: skip
    store.claim(HOST, NAME, settings=settings, worker="w", now=T0 + 50)
    fail(resize, a, now=T0 + 100)  # b, c and lone fail for it
    client = client_for("olga", role="operator", queue=resize)
    ids = [c.id, lone.id, b.id, a.id]  # newest first, as the page shows them; a left out below
    page = client.post(BULK, {"do": "retry:selected", "ids": ids[:3]}).content.decode()
    answer = client.post(BULK, dict_of(hidden_fields(page)), follow=True)
    assert "retry: 0 done, 3 refused (3 dependency_failed)" in answer.content.decode()
    page = client.post(BULK, {"do": "retry:selected", "ids": ids}).content.decode()
    answer = client.post(BULK, dict_of(hidden_fields(page)), follow=True)
    assert "retry: 4 done, 0 refused" in answer.content.decode()
    waiting = {t.id: store.read(HOST, NAME, t.id).waiting_for for t in (a, b, c, lone)}
    assert waiting == {a.id: None, b.id: [f"{NAME}/{a.id}"], c.id: [f"{NAME}/{b.id}"],
                       lone.id: [f"{NAME}/{a.id}"]}  # fmt: skip
