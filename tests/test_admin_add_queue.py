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


QUEUE_FORM = {
    "name": "thumbs", "queue_seconds": 3600, "lease_seconds": 60,
    "max_attempts": 3, "backoff_seconds": 5, "backoff_factor": 4, "backoff_cap_seconds": 300,
    "retain_seconds": 3600, "retain_from": "finished", "max_retain_seconds": 86400,
    "max_item_bytes": 65536, "max_pending": 0, "item_schema": "", "store": "files",
    "rate_count": 0, "rate_seconds": 1, "max_processing": 0, "max_per_key": 0,
    "access-TOTAL_FORMS": 0, "access-INITIAL_FORMS": 0,
}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("max_pending", "٣", "Enter a whole number in the digits 0-9"),
        ("lease_seconds", "6_0", "Enter a whole number in the digits 0-9"),
        ("rate_count", "3.0", "Enter a whole number in the digits 0-9"),
        ("max_processing", "1000001", "less than or equal to 1000000"),
        ("max_per_key", "1000001", "less than or equal to 1000000"),
        ("max_pending", str(2**31), "less than or equal to 2147483647"),
    ],
)
def test_a_number_not_in_ascii_digits_or_past_its_bound_is_refused(
    admin_client, make_queue, field, value, said
):
    from queues.models import Queue

    host = make_queue().host
    response = admin_client.post("/admin/queues/queue/add/",
                                 {**QUEUE_FORM, "host": host.pk, field: value})  # fmt: skip
    assert response.status_code == 200
    assert said in response.content.decode()
    assert not Queue.objects.filter(name="thumbs").exists()
    ok = admin_client.post("/admin/queues/queue/add/",
                           {**QUEUE_FORM, "host": host.pk, field: " 7 "})  # fmt: skip
    assert ok.status_code == 302  # the spaces a form field lets go of, as every one does


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
