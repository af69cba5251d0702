"""The admin's Add-queue form: a queue not saved yet has no tasks for a sweep to act on, so the
form offers neither "Save even so" nor "Preview the next sweep"; the change form still does."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="a-long-admin-password"))
    return client


def test_the_add_form_has_no_sweep_preview_and_the_change_form_has(admin_client, make_queue):
    added = admin_client.get("/admin/queues/queue/add/").content.decode()
    assert "Save even so" not in added and "_preview_sweep" not in added
    assert 'name="confirm_sweep"' not in added
    queue = make_queue()
    changed = admin_client.get(f"/admin/queues/queue/{queue.pk}/change/").content.decode()
    assert "Save even so" in changed and 'name="_preview_sweep"' in changed


def test_a_queue_is_still_added_without_the_tick(admin_client, make_queue):
    host = make_queue().host
    response = admin_client.post("/admin/queues/queue/add/", {
        "host": host.pk, "name": "thumbs", "queue_seconds": 3600, "lease_seconds": 60,
        "max_attempts": 3, "backoff_seconds": 5, "backoff_factor": 4, "backoff_cap_seconds": 300,
        "retain_seconds": 3600, "retain_from": "finished", "max_retain_seconds": 86400,
        "max_item_bytes": 65536, "max_pending": 0, "item_schema": "", "store": "files",
        "rate_count": 0, "rate_seconds": 1, "max_processing": 0, "max_per_key": 0,
        "access-TOTAL_FORMS": 0, "access-INITIAL_FORMS": 0,
    })  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
