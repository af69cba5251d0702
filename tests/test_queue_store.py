"""A queue's `store` setting: where the PostgreSQL store's database comes from, the refusals
(no database for it; a change while tasks are in flight), and the router sending each queue's
calls to its own store."""

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from queues import stores
from queues.models import Queue
from queues.store import NotFound, StorageUnavailable, StoreConfig
from queues.stores.router import StoreRouter

HOST = "task.example.com"
ON_POSTGRES = connection.vendor == "postgresql"
needs_sqlite = pytest.mark.skipif(
    ON_POSTGRES, reason="Django's database is PostgreSQL here: the store always has a database"
)


def _post(queue: Queue, n: int = 1):
    return stores.of(HOST, queue.name).post(HOST, queue.name, {"n": n},
                                            settings=queue.to_settings(),
                                            posted_by=None).task  # fmt: skip


def _queue_form(queue: Queue, **changes) -> dict:
    form = {
        "host": queue.host.pk, "name": queue.name, "queue_seconds": 86400, "lease_seconds": 60,
        "retain_seconds": 3600, "retain_from": "finished", "max_retain_seconds": 604800,
        "max_attempts": 3, "backoff_seconds": 5, "backoff_factor": 4, "backoff_cap_seconds": 300,
        "max_item_bytes": 65536, "max_pending": 0, "item_schema": "", "store": queue.store,
        "access-TOTAL_FORMS": 0, "access-INITIAL_FORMS": 0,
    }  # fmt: skip
    return {**form, **changes}


@pytest.mark.django_db
def test_a_new_queue_keeps_its_tasks_in_files(make_queue, store_dirs):
    queue = make_queue(HOST, "resize")
    assert queue.store == "files"
    task = _post(queue)
    assert list((store_dirs["items"] / HOST / "resize").rglob(f"{task.id}*"))


@needs_sqlite
@pytest.mark.django_db
def test_createqueue_refuses_postgres_without_a_postgresql_database(settings):
    settings.TASKHOSTER_PG_STORE_URL = ""
    with pytest.raises(CommandError, match="TASKHOSTER_PG_STORE_URL"):
        call_command("createqueue", HOST, "resize", "--store", "postgres")
    assert not Queue.objects.filter(name="resize").exists()


@needs_sqlite
def test_the_admin_form_refuses_postgres_without_a_postgresql_database(
    admin_client, make_queue, settings
):
    settings.TASKHOSTER_PG_STORE_URL = ""
    queue = make_queue(HOST, "resize")
    page = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/",
                             _queue_form(queue, store="postgres"))  # fmt: skip
    assert page.status_code == 200  # the form again, with the reason
    assert "TASKHOSTER_PG_STORE_URL" in page.content.decode()
    queue.refresh_from_db()
    assert queue.store == "files"


def test_the_admin_shows_the_store_in_the_form_and_the_list(admin_client, make_queue):
    queue = make_queue(HOST, "resize")
    form = admin_client.get(f"/admin/queues/queue/{queue.pk}/change/").content.decode()
    assert 'name="store"' in form and "PostgreSQL" in form
    listing = admin_client.get("/admin/queues/queue/").content.decode()
    assert "column-store" in listing


def test_createqueue_puts_a_queue_on_postgres(pg_store, store_dirs):
    call_command("createqueue", HOST, "resize", "--store", "postgres")
    queue = Queue.objects.get(name="resize")
    assert queue.store == "postgres"
    task = _post(queue)
    # the task is in the database, and nothing of it on this machine's disk
    assert stores.router().postgres.read(HOST, "resize", task.id).id == task.id
    assert not (store_dirs["items"] / HOST / "resize").exists()


@pytest.mark.parametrize("in_flight", ["pending", "processing"])
def test_changing_the_store_is_refused_while_tasks_are_in_flight(pg_store, make_queue, in_flight):
    queue = make_queue(HOST, "resize")
    _post(queue)
    if in_flight == "processing":
        stores.of(HOST, "resize").claim(HOST, "resize", settings=queue.to_settings(), worker="w")
    with pytest.raises(CommandError, match="1 pending or processing task in its files store"):
        call_command("createqueue", HOST, "resize", "--store", "postgres")
    queue.refresh_from_db()
    assert queue.store == "files"


def test_the_admin_refuses_a_change_of_store_while_tasks_are_in_flight(
    pg_store, admin_client, make_queue
):
    queue = make_queue(HOST, "resize", store="postgres")
    _post(queue)
    _post(queue, 2)
    page = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/",
                             _queue_form(queue, store="files"))  # fmt: skip
    assert "2 pending or processing tasks in its postgres store" in page.content.decode()
    queue.refresh_from_db()
    assert queue.store == "postgres"


def test_once_tasks_have_ended_the_store_changes_for_new_tasks(pg_store, make_queue, store_dirs):
    queue = make_queue(HOST, "resize")
    old = _post(queue)
    stores.of(HOST, "resize").cancel(HOST, "resize", old.id, settings=queue.to_settings())
    call_command("createqueue", HOST, "resize", "--store", "postgres")
    queue.refresh_from_db()
    new = _post(queue, 2)
    store = stores.router()
    assert store.postgres.read(HOST, "resize", new.id).status == "pending"
    # the ended task stays in the file store until retention removes it; reads look in the
    # queue's current store, so the API no longer finds it
    assert store.files.read(HOST, "resize", old.id).status == "cancelled"
    with pytest.raises(NotFound):
        stores.of(HOST, "resize").read(HOST, "resize", old.id)
    # the sweep covers both: the file store's queue on disk and the PostgreSQL one
    assert ("task.example.com", "resize") in store.queues()
    assert store.sweep_all(lambda h, q: queue.to_settings()).queues == 2


def test_the_router_sends_each_queue_to_its_store(pg_store, make_queue, store_dirs):
    files = make_queue(HOST, "on-files")
    pg = make_queue(HOST, "on-postgres", store="postgres")
    on_disk, in_db = _post(files), _post(pg)
    store = stores.router()
    assert stores.of(HOST, "on-files").read(HOST, "on-files", on_disk.id).id == on_disk.id
    assert stores.of(HOST, "on-postgres").read(HOST, "on-postgres", in_db.id).id == in_db.id
    with pytest.raises(NotFound):
        store.files.read(HOST, "on-postgres", in_db.id)
    with pytest.raises(NotFound):
        store.postgres.read(HOST, "on-files", on_disk.id)
    assert {(HOST, "on-files"), (HOST, "on-postgres")} <= set(store.queues())
    [claimed] = stores.of(HOST, "on-postgres").claim(
        HOST, "on-postgres", settings=pg.to_settings(), worker="w"
    )
    assert (
        claimed.id == in_db.id
        and stores.of(HOST, "on-postgres").stats(HOST, "on-postgres").processing == 1
    )


def test_a_postgres_queue_without_a_database_answers_storage_unavailable(tmp_path):
    # a queue saved as postgres on a site that has since lost its PostgreSQL setting
    config = StoreConfig(items_dir=tmp_path / "i", logs_dir=tmp_path / "l", fsync=False)
    (tmp_path / "i").mkdir()
    (tmp_path / "l").mkdir()
    from queues.store import QueueStore

    router = StoreRouter(QueueStore(config), kind_of=lambda h, q: "postgres",
                         open_postgres=None, postgres_queues=lambda: [])  # fmt: skip
    with pytest.raises(StorageUnavailable, match="TASKHOSTER_PG_STORE_URL"):
        router.of(HOST, "resize").read(HOST, "resize", "0123456789abcdef")
    router.close()
