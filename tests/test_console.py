import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues import stores
from queues.models import QueueAccess

pytestmark = pytest.mark.django_db


def client_for(username: str, *, role: str | None = None, queue=None, **flags) -> Client:
    user = User.objects.create_user(username, password="pw-" + username, **flags)
    if role:
        QueueAccess.objects.create(queue=queue, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


def post(queue, item=None):
    settings = queue.to_settings()
    where = (queue.host.name, queue.name)
    return stores.of(*where).post(*where, item or {"n": 1}, settings=settings,
                                  posted_by="alice").task  # fmt: skip


def test_console_needs_a_login(resize):
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_dashboard_shows_operated_queues_with_counts(resize, other):
    post(resize)
    post(resize)
    client = client_for("olga", role="operator", queue=resize)
    page = client.get("/").content.decode()
    assert "task.example.com/resize" in page
    assert "other.example.com/secret" not in page
    data = client.get("/console/queues.json").json()["queues"]
    assert [(q["host"], q["queue"], q["pending"]) for q in data] == [
        ("task.example.com", "resize", 2)
    ]


def test_a_queue_never_posted_to_shows_zeros(resize):
    data = client_for("olga", is_staff=True).get("/console/queues.json").json()["queues"]
    assert data[0]["pending"] == 0 and data[0]["done"] == 0


@pytest.mark.parametrize("role", ["producer", "worker"])
def test_non_operators_see_nothing_and_get_404(resize, role):
    task = post(resize)
    client = client_for("pat", role=role, queue=resize)
    assert "task.example.com/resize" not in client.get("/").content.decode()
    assert client.get("/console/task.example.com/resize/").status_code == 404
    assert client.get(f"/console/task.example.com/resize/{task.id}/").status_code == 404
    response = client.post(f"/console/task.example.com/resize/{task.id}/cancel")
    assert response.status_code == 404
    assert (
        stores.of("task.example.com", "resize").read("task.example.com", "resize", task.id).status
        == "pending"
    )


def test_foreign_and_missing_queues_answer_the_same_404(resize, other):
    client = client_for("olga", role="operator", queue=resize)
    foreign = client.get("/console/other.example.com/secret/")
    missing = client.get("/console/nowhere.example.com/none/")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.content == missing.content


def test_queue_page_lists_tasks_and_filters_by_status(resize):
    first, second = post(resize), post(resize)
    stores.of("task.example.com", "resize").cancel(
        "task.example.com", "resize", first.id, settings=resize.to_settings()
    )
    client = client_for("olga", is_staff=True)
    page = client.get("/console/task.example.com/resize/").content.decode()
    assert first.id in page and second.id in page
    cancelled = client.get("/console/task.example.com/resize/?status=cancelled").content.decode()
    assert first.id in cancelled and second.id not in cancelled
    assert client.get("/console/task.example.com/resize/?status=bogus&page=x").status_code == 200


def test_operator_cancels_then_retries_a_task(resize):
    task = post(resize)
    client = client_for("olga", role="operator", queue=resize)
    url = f"/console/task.example.com/resize/{task.id}/"
    assert client.post(url + "cancel").status_code == 302
    assert (
        stores.of("task.example.com", "resize").read("task.example.com", "resize", task.id).status
        == "cancelled"
    )
    page = client.get(url).content.decode()
    assert "cancel done" in page
    client.post(url + "retry")
    assert (
        stores.of("task.example.com", "resize").read("task.example.com", "resize", task.id).status
        == "pending"
    )


def test_the_task_page_shows_when_it_was_posted_and_when_retried(resize):
    store, settings = stores.of("task.example.com", "resize"), resize.to_settings()
    task = store.post("task.example.com", "resize", {"n": 1}, settings=settings,
                      posted_by="alice", now=1_751_500_000_000).task  # fmt: skip
    store.cancel("task.example.com", "resize", task.id, settings=settings, now=1_751_500_001_000)
    store.retry("task.example.com", "resize", task.id, settings=settings, now=1_751_586_400_000)
    client = client_for("olga", role="operator", queue=resize)
    page = client.get(f"/console/task.example.com/resize/{task.id}/").content.decode()
    # "ago" as people read it, the exact time on hover
    assert '<th scope="row">posted</th><td><time title="2025-07-02 23:46:40.000Z">' in page
    assert " ago</time> by alice" in page
    assert '<th scope="row">requeued</th><td><time title="2025-07-03 23:46:40.000Z">' in page


def test_the_task_page_says_what_a_task_waits_for_and_what_ended_it(resize):
    store, settings = stores.of("task.example.com", "resize"), resize.to_settings()
    a = post(resize)
    b = store.post("task.example.com", "resize", {"n": 2}, settings=settings, posted_by="alice",
                   after=[a.id]).task  # fmt: skip
    client = client_for("olga", role="operator", queue=resize)
    page = client.get(f"/console/task.example.com/resize/{b.id}/").content.decode()
    assert f'<span class="mono">resize/{a.id}</span> · <strong>waiting for 1</strong>' in page
    store.cancel("task.example.com", "resize", a.id, settings=settings)
    page = client.get(f"/console/task.example.com/resize/{b.id}/").content.decode()
    assert f'ended by <span class="mono">resize/{a.id}</span>, which did not finish' in page
    assert "dependency_failed" in page


def test_a_refused_action_is_reported_and_changes_nothing(resize):
    task = post(resize)
    client = client_for("olga", role="operator", queue=resize)
    response = client.post(f"/console/task.example.com/resize/{task.id}/retry", follow=True)
    assert "not_retryable" in response.content.decode()
    assert (
        stores.of("task.example.com", "resize").read("task.example.com", "resize", task.id).status
        == "pending"
    )


def test_actions_need_post_and_a_csrf_token(resize):
    task = post(resize)
    user = User.objects.create_user("olga", password="pw", is_staff=True)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    url = f"/console/task.example.com/resize/{task.id}/cancel"
    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 403
    assert client.post("/console/task.example.com/resize/pause", {"paused": "1"}).status_code == 403
    assert (
        stores.of("task.example.com", "resize").read("task.example.com", "resize", task.id).status
        == "pending"
    )


def test_pause_and_resume(resize):
    client = client_for("olga", role="operator", queue=resize)
    client.post("/console/task.example.com/resize/pause", {"paused": "1"})
    resize.refresh_from_db()
    assert resize.paused
    client.post("/console/task.example.com/resize/pause", {"paused": "0"})
    resize.refresh_from_db()
    assert not resize.paused


def test_task_page_links_to_its_log_timeline(resize):
    task = post(resize)
    page = client_for("olga", is_staff=True).get(f"/console/task.example.com/resize/{task.id}/")
    assert f'href="/logs/task.example.com/resize/{task.id}/"' in page.content.decode()


def test_user_content_is_escaped(resize):
    task = post(resize, {"x": "<script>alert(1)</script>"})
    client = client_for("olga", is_staff=True)
    page = client.get(f"/console/task.example.com/resize/{task.id}/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize(
    "path",
    [
        "/console/task.example.com/resize/0123456789ABCDEF/",
        "/console/task.example.com/resize/0123456789abcde/",
        "/console/task.example.com/resize/..%2F..%2Fetc/",
        "/console/task.example.com/resize/0123456789abcdef/",
    ],
)
def test_bad_or_unknown_task_ids_are_404(resize, path):
    assert client_for("olga", is_staff=True).get(path).status_code == 404


def test_times_are_shown_to_the_millisecond_in_utc():
    from datetime import UTC, datetime, timedelta, timezone

    from queues.templatetags.console import from_ms, utc_ms

    moment = datetime(2026, 7, 26, 11, 6, 52, 4000, tzinfo=timezone(timedelta(hours=2)))
    assert utc_ms(moment) == "2026-07-26 09:06:52.004Z"
    assert from_ms(int(moment.timestamp() * 1000)) == "2026-07-26 09:06:52.004Z"
    assert from_ms(None) == "" and utc_ms(None) == ""
    assert utc_ms(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01 00:00:00.000Z"
