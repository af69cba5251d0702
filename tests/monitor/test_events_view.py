"""Who may subscribe to a queue's events, checked through the view itself (no server)."""

import json

import pytest
from rest_framework.test import APIRequestFactory

from queues import stores
from queues.api import held_threads
from queues.api.events import EventStreamView
from queues.auth.tokens import issue_token
from queues.services import grant

HOST, QUEUE = "task.example.com", "resize"


OPENED = []  # every response subscribe() made: a server closes each one, and so do the tests


@pytest.fixture
def queue(make_queue):
    return make_queue(HOST, QUEUE)


@pytest.fixture(autouse=True)
def close_streams():
    yield
    while OPENED:
        OPENED.pop().close()  # each open stream holds one of the process's waiting threads


def token_for(username, role=None):
    if role:
        grant(username, f"{HOST}/{QUEUE}", role)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get_or_create(username=username)[0]
    return issue_token(user, "t")[1]


def subscribe(token=None, host=HOST, queue=QUEUE, **query):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    request = APIRequestFactory().get("/events", query, HTTP_ACCEPT="text/event-stream", **headers)
    response = EventStreamView.as_view()(request, host=host, queue=queue)
    if not response.streaming:
        response.render()
    OPENED.append(response)
    return response


def refusal(response):
    return response.status_code, json.loads(response.content)["code"]


@pytest.mark.django_db
def test_operators_get_a_stream(queue):
    response = subscribe(token_for("olga", "operator"))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert next(iter(response.streaming_content)).startswith(b"retry:")
    response.close()


@pytest.mark.django_db
def test_refusals_are_the_api_shapes(queue):
    assert refusal(subscribe()) == (401, "not_authenticated")
    assert refusal(subscribe("th_nope")) == (401, "not_authenticated")
    operator = token_for("olga", "operator")
    assert refusal(subscribe(operator, queue="other")) == (404, "not_found")
    assert refusal(subscribe(operator, host="..")) == (404, "not_found")
    assert refusal(subscribe(operator, task="../x")) == (404, "not_found")
    assert refusal(subscribe(operator, lastEventId="yesterday")) == (400, "invalid_request")
    assert refusal(subscribe(token_for("stranger"))) == (404, "not_found")
    assert refusal(subscribe(token_for("wendy", "worker")))[0] == 403


@pytest.mark.django_db
def test_a_producer_follows_only_its_own_task(queue):
    producer = token_for("paul", "producer")
    token_for("petra", "producer")
    settings = queue.to_settings()
    own = (
        stores.of(HOST, QUEUE).post(HOST, QUEUE, {"n": 1}, settings=settings, posted_by="paul").task
    )
    other = (
        stores.of(HOST, QUEUE)
        .post(HOST, QUEUE, {"n": 2}, settings=settings, posted_by="petra")
        .task
    )
    assert subscribe(producer, task=own.id).status_code == 200
    assert refusal(subscribe(producer, task=other.id)) == (404, "not_found")
    assert refusal(subscribe(producer, task="0" * 16)) == (404, "not_found")
    assert refusal(subscribe(producer))[0] == 403


@pytest.mark.django_db
def test_streams_hold_at_most_their_share_of_the_waiting_threads(queue, settings):
    """Past TASKHOSTER_MAX_STREAMS a subscriber gets a reconnect hint, not a thread; waiting
    claims keep the rest of TASKHOSTER_MAX_WAITING; a closed stream frees its thread."""
    settings.TASKHOSTER_MAX_WAITING, settings.TASKHOSTER_MAX_STREAMS = 3, 2
    operator = token_for("olga", "operator")
    first, second = subscribe(operator), subscribe(operator)
    assert held_threads.held() == (2, 2)
    busy = subscribe(operator)
    assert busy.status_code == 200 and busy["Retry-After"] == "5"
    assert b"".join(busy.streaming_content).startswith(b"retry: 5000\n:")
    assert held_threads.held() == (2, 2)  # the refused one holds nothing
    with held_threads.slot() as claim_may_wait:  # a waiting claim still gets the third thread
        assert claim_may_wait
        assert held_threads.held() == (3, 2)
    first.close()  # closed before its first chunk was read: the thread is free all the same
    assert held_threads.held() == (1, 1)
    third = subscribe(operator)
    assert next(iter(third.streaming_content)).startswith(b"retry: 2000")
    second.close()
    third.close()
    assert held_threads.held() == (0, 0)


@pytest.mark.django_db
def test_streams_and_waiting_requests_share_one_limit(queue, settings):
    settings.TASKHOSTER_MAX_WAITING, settings.TASKHOSTER_MAX_STREAMS = 2, 2
    operator = token_for("olga", "operator")
    with held_threads.slot(), held_threads.slot():  # two waiting claims hold every waiting thread
        refused = subscribe(operator)
        assert refused["Retry-After"] == "5"
    stream = subscribe(operator)
    assert held_threads.held() == (1, 1)
    stream.close()


@pytest.mark.django_db
def test_a_stream_that_fails_to_start_gives_its_thread_back(queue, settings, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings.TASKHOSTER_LOGS_DIR = blocker  # the stream cannot make its tasks/ directory
    response = subscribe(token_for("olga", "operator"))
    assert refusal(response) == (503, "storage_unavailable")
    assert held_threads.held() == (0, 0)


@pytest.mark.django_db
def test_a_heartbeat_reaches_no_subscriber(queue):
    """The stream follows the log: a progress call without a body writes no line, so the
    subscribers see the progress that said something and the result, not the beats."""
    settings = queue.to_settings()
    store = stores.of(HOST, QUEUE)
    task = store.post(HOST, QUEUE, {"n": 1}, settings=settings, posted_by="paul").task
    store.claim(HOST, QUEUE, settings=settings, worker="box-1")
    stream = subscribe(token_for("olga", "operator"), task=task.id)
    chunks = iter(stream.streaming_content)
    assert next(chunks).startswith(b"retry:")
    report = {"settings": settings, "worker": "box-1", "attempt": 1}
    for _ in range(5):
        store.progress(HOST, QUEUE, task.id, **report)
    store.progress(HOST, QUEUE, task.id, progress={"percent": 50}, **report)
    store.finish(HOST, QUEUE, task.id, result={"ok": True}, **report)
    events = [
        line.split(b": ", 1)[1] for line in next(chunks).splitlines() if line.startswith(b"event:")
    ]
    assert events == [b"progress", b"result"]


# -- a PostgreSQL queue: its store's event rows, framed as the day-files' lines are, and
# resumed from `Last-Event-ID` (a row position, `pg:<id>`)


@pytest.fixture
def pg_queue(pg_store, make_queue, settings):
    settings.TASKHOSTER_SSE_KEEPALIVE_SECONDS = 0.05
    return make_queue(HOST, QUEUE, store="postgres")


def frames_until(response, event: str, most: int = 400) -> list[dict[str, str]]:
    """The stream's event frames (id, event) up to the first `event` one; the keep-alives
    between them pace the loop, so a stream that never sends it fails after `most` chunks."""
    seen: list[dict[str, str]] = []
    chunks = iter(response.streaming_content)
    for _ in range(most):
        for block in next(chunks).decode().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "event" in fields:
                seen.append(fields)
                if fields["event"] == event:
                    return seen
    raise AssertionError(f"no {event!r} frame in {most} chunks; saw {seen}")


@pytest.mark.django_db  # before the streams close (close_streams)
def test_an_operator_follows_a_postgres_queue_and_resumes_after_the_last_row(pg_queue):
    operator = token_for("olga", "operator")
    store, settings = stores.of(HOST, QUEUE), pg_queue.to_settings()
    store.post(HOST, QUEUE, {"n": 0}, settings=settings, posted_by=None)  # before: not sent
    stream = subscribe(operator)
    task = store.post(HOST, QUEUE, {"n": 1}, settings=settings, posted_by=None).task
    [posted] = frames_until(stream, "posted")
    assert posted["id"].startswith("pg:") and f'"id":"{task.id}"' in posted["data"]
    stream.close()
    store.claim(HOST, QUEUE, settings=settings, worker="w", max_tasks=2)
    # a client back after a drop (maybe on another web server) gets only what came since
    resumed = frames_until(subscribe(operator, lastEventId=posted["id"]), "claimed")
    assert [f["event"] for f in resumed][-1] == "claimed"
    assert all(f["event"] != "posted" for f in resumed)


@pytest.mark.django_db  # before the streams close (close_streams)
def test_a_producer_follows_its_own_task_on_a_postgres_queue(pg_queue):
    producer = token_for("paul", "producer")
    own = stores.of(HOST, QUEUE).post(HOST, QUEUE, {"n": 1}, settings=pg_queue.to_settings(),
                           posted_by="paul").task  # fmt: skip
    stream = subscribe(producer, task=own.id)
    stores.of(HOST, QUEUE).cancel(HOST, QUEUE, own.id, settings=pg_queue.to_settings())
    assert own.id in frames_until(stream, "cancelled")[-1]["data"]


@pytest.mark.django_db  # before the streams close (close_streams)
def test_a_day_file_position_is_refused_on_a_postgres_queue(pg_queue):
    operator = token_for("olga", "operator")
    assert refusal(subscribe(operator, lastEventId="2026-12-01:10")) == (400, "invalid_request")
    assert refusal(subscribe(operator, lastEventId="pg:x")) == (400, "invalid_request")


@pytest.mark.django_db
def test_a_postgres_queue_stream_finds_its_rows_by_an_index_of_task_logs_table(pg_store):
    """Sharing the console's database, the store's events are Task Logs' rows: a stream's
    start (the queue's newest row) and its reads (rows past an id) use the (host, queue, id)
    index the tasklogs migration adds."""
    import psycopg
    from psycopg import sql

    from queues.stores.pg_location import TASK_LOGS_TABLE

    if not pg_store.shares_console_db:
        pytest.skip("the store's events are in its own th_events table (tests/store cover it)")
    with psycopg.connect(pg_store.dsn, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # what serves it, not what is cheapest here
        plan = conn.execute(
            sql.SQL(
                "EXPLAIN SELECT id FROM {} WHERE host = %s AND queue = %s AND id > %s"
                " ORDER BY id DESC LIMIT 1"
            ).format(sql.Identifier(TASK_LOGS_TABLE)),
            (HOST, QUEUE, 0),
        ).fetchall()
    text = "\n".join(row[0] for row in plan)
    assert "Index Only Scan Backward using taskevent_queue_id" in text, text


# -- a task's history: `from=posted` replays its events so far, says `: caught up`, follows


def until_caught_up(response, most: int = 400) -> tuple[list[dict[str, str]], object]:
    """The event frames before the `: caught up` comment, and the stream's chunks after it."""
    seen: list[dict[str, str]] = []
    chunks = iter(response.streaming_content)
    for _ in range(most):
        for block in next(chunks).decode().split("\n\n"):
            if block == ": caught up":
                return seen, chunks
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "event" in fields:
                seen.append(fields)
    raise AssertionError(f"no ': caught up' in {most} chunks; saw {seen}")


def _history_of_a_running_task(store, settings):
    other = store.post(HOST, QUEUE, {"n": 0}, settings=settings, posted_by="paul").task
    task = store.post(HOST, QUEUE, {"n": 1}, settings=settings, posted_by="paul").task
    store.cancel(HOST, QUEUE, other.id, settings=settings)
    store.claim(HOST, QUEUE, settings=settings, worker="box-1")
    store.progress(HOST, QUEUE, task.id, settings=settings, worker="box-1", attempt=1,
                   progress={"percent": 50})  # fmt: skip
    return task


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["files", "postgres"])
def test_from_posted_replays_a_tasks_events_so_far_then_follows(request, make_queue, settings,
                                                                kind):  # fmt: skip
    if kind == "postgres":
        request.getfixturevalue("pg_store")
    settings.TASKHOSTER_SSE_KEEPALIVE_SECONDS = 0.05
    queue = make_queue(HOST, QUEUE, store=kind)
    store, queue_settings = stores.of(HOST, QUEUE), queue.to_settings()
    task = _history_of_a_running_task(store, queue_settings)
    stream = subscribe(token_for("paul", "producer"), task=task.id, **{"from": "posted"})
    history, chunks = until_caught_up(stream)
    assert [f["event"] for f in history] == ["posted", "claimed", "progress"]
    assert all(f'"id":"{task.id}"' in f["data"] for f in history)
    store.finish(HOST, QUEUE, task.id, settings=queue_settings, worker="box-1", attempt=1,
                 result={"ok": True})  # fmt: skip
    later = b""
    while b"event: result" not in later:
        later += next(chunks)
    # a reconnect after the history resumes where it was: nothing replayed
    resumed, _ = until_caught_up(
        subscribe(token_for("olga", "operator"), task=task.id, lastEventId=history[-1]["id"],
                  **{"from": "posted"})
    )  # fmt: skip
    assert [f["event"] for f in resumed] == ["result"]


@pytest.mark.django_db
def test_a_stream_without_from_has_no_history_and_no_caught_up(queue):
    store, settings = stores.of(HOST, QUEUE), queue.to_settings()
    task = _history_of_a_running_task(store, settings)
    stream = subscribe(token_for("olga", "operator"), task=task.id)
    chunks = iter(stream.streaming_content)
    assert next(chunks).startswith(b"retry:")
    store.finish(HOST, QUEUE, task.id, settings=settings, worker="box-1", attempt=1, result={})
    then = next(chunks)
    assert b"event: result" in then and b"event: posted" not in then and b"caught up" not in then


@pytest.mark.django_db
def test_from_refusals(queue):
    operator = token_for("olga", "operator")
    task = stores.of(HOST, QUEUE).post(HOST, QUEUE, {"n": 1}, settings=queue.to_settings(),
                                       posted_by=None).task  # fmt: skip
    wrong = subscribe(operator, task=task.id, **{"from": "start"})
    assert refusal(wrong) == (400, "invalid_request")
    assert "from must be 'posted'" in json.loads(wrong.content)["detail"]
    whole_queue = subscribe(operator, **{"from": "posted"})
    assert refusal(whole_queue) == (400, "invalid_request")
    assert "needs task=ID" in json.loads(whole_queue.content)["detail"]
    assert refusal(subscribe(operator, task="0123456789abcdef", **{"from": "posted"})) == (
        404, "not_found",
    )  # fmt: skip
