"""The queue form's sweep preview: what the next sweep would do with the settings in the form,
shown before anything is saved, and a tick required to save settings that make it do more."""

from __future__ import annotations

import time
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues import stores
from queues.models import Queue

pytestmark = pytest.mark.django_db
HOST = "task.example.com"
HOUR = 3_600_000


@pytest.fixture
def admin_client():
    user = User.objects.create_superuser("root", password="a-long-admin-password")
    client = Client()
    client.force_login(user)
    return client


class _Form(HTMLParser):
    """The values a browser would send for the form on the page (the submit buttons aside)."""

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "checkbox"):
            self.data[name] = a.get("value") or ""
        elif tag == "input" and name and a.get("type") == "checkbox" and "checked" in a:
            self.data[name] = "on"
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self.data[self._select] = a.get("value") or ""
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = ""

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        if tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea:  # a browser drops the newline that follows <textarea>
            self.data[self._textarea] += data.removeprefix("\r").removeprefix("\n")


def _form_data(admin_client, queue: Queue) -> dict[str, str]:
    parser = _Form()
    parser.feed(admin_client.get(f"/admin/queues/queue/{queue.pk}/change/").content.decode())
    return parser.data


@pytest.fixture
def busy(make_queue, store_kind):
    """A queue (of each store) with one task waiting two hours and one finished two hours ago."""
    queue = make_queue(HOST, "resize", queue_seconds=86400, retain_seconds=86400,
                       store=store_kind)  # fmt: skip
    store, settings = stores.of(HOST, "resize"), queue.to_settings()
    start = time.time_ns() // 1_000_000 - 2 * HOUR
    waiting = store.post(HOST, "resize", {"n": 1}, settings=settings, posted_by="a", now=start)
    done = store.post(HOST, "resize", {"n": 2}, settings=settings, posted_by="a", now=start + 1)
    # claim the second (the first is older: claim it, finish the second by hand)
    store.claim(HOST, "resize", settings=settings, worker="w", now=start + 2, max_tasks=2)
    store.finish(HOST, "resize", done.task.id, settings=settings, worker="w", attempt=1,
                 result={}, now=start + 3)  # fmt: skip
    store.requeue(HOST, "resize", waiting.task.id, settings=settings, now=start + 4)
    return queue, waiting.task.id, done.task.id


def _held(store_dirs, queue):
    """What the store holds of the queue: its task files, or its rows and event rows."""
    if queue.store == "files":
        return sorted(p.name for p in store_dirs["items"].rglob("*.json"))
    store, host = stores.router(), queue.host.name
    tasks = stores.of(host, queue.name).list_tasks(host, queue.name, limit=100).tasks
    return [t.to_record() for t in tasks], store.postgres.events_since(
        host, queue.name, 0, limit=1000
    )


def test_preview_shows_what_shorter_limits_would_do_and_saves_nothing(admin_client, busy,
                                                                      store_dirs):  # fmt: skip
    queue, waiting, done = busy
    data = _form_data(admin_client, queue)
    held = _held(store_dirs, queue)
    data.update(queue_seconds="3600", retain_seconds="3600", _preview_sweep="Preview")
    response = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", data)
    page = response.content.decode()
    assert response.status_code == 200 and "Preview only: nothing was saved." in page
    more = '</th><td class="num">0</td><td class="num"><strong>1</strong>'  # 0 now, 1 then
    assert f'<th scope="row">fail with a timeout{more}' in page
    assert f'<th scope="row">delete (retention over){more}' in page
    assert waiting in page and done in page
    queue.refresh_from_db()
    assert (queue.queue_seconds, queue.retain_seconds) == (86400, 86400)
    assert _held(store_dirs, queue) == held


def test_settings_that_make_the_sweep_do_more_need_a_tick(admin_client, busy):
    queue, _, _ = busy
    data = _form_data(admin_client, queue)
    data.update(retain_seconds="3600")
    refused = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", data)
    assert (
        refused.status_code == 200
        and "Tick “Save even so” to save them." in refused.content.decode()
    )
    queue.refresh_from_db()
    assert queue.retain_seconds == 86400
    data["confirm_sweep"] = "on"
    saved = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", data)
    assert saved.status_code == 302
    queue.refresh_from_db()
    assert queue.retain_seconds == 3600


def test_settings_that_change_no_sweep_save_at_once(admin_client, busy):
    queue, _, _ = busy
    data = _form_data(admin_client, queue)
    data.update(retain_seconds="172800", lease_seconds="120")  # longer: the sweep does less
    assert admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", data).status_code == 302
    queue.refresh_from_db()
    assert (queue.retain_seconds, queue.lease_seconds) == (172800, 120)


def test_a_new_queue_previews_nothing_and_saves(admin_client, make_queue):
    other = make_queue(HOST, "other")
    parser = _Form()
    parser.feed(admin_client.get("/admin/queues/queue/add/").content.decode())
    data = parser.data | {"host": str(other.host.pk), "name": "fresh"}
    preview = admin_client.post("/admin/queues/queue/add/", data | {"_preview_sweep": "1"})
    assert "Preview only" in preview.content.decode()
    assert not Queue.objects.filter(name="fresh").exists()
    assert admin_client.post("/admin/queues/queue/add/", data).status_code == 302
    assert Queue.objects.filter(name="fresh").exists()


def test_a_postgres_queue_whose_database_does_not_answer_is_refused_with_the_reason(
    admin_client, make_queue, settings
):
    """The preview reads the queue's rows: with the store's database gone it cannot, and the
    form says so instead of failing or saving unseen."""
    from django.db import connection

    if connection.vendor == "postgresql":
        pytest.skip("on PostgreSQL the store is the console's own database, which answers")
    settings.TASKHOSTER_PG_STORE_URL = "postgresql://nobody@127.0.0.1:1/gone?connect_timeout=2"
    queue = make_queue(HOST, "far", store="postgres", retain_seconds=86400)
    data = _form_data(admin_client, queue) | {"retain_seconds": "3600"}
    response = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", data)
    page = response.content.decode()
    assert response.status_code == 200
    assert "The next sweep could not be previewed, so nothing was saved:" in page
    assert "not reachable" in page
    queue.refresh_from_db()
    assert queue.retain_seconds == 86400
