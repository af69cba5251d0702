"""The webhook's admin shows its secret and refuses a refused URL; notifications and every
delivery try are visible in the admin and on the console's queue page."""

from __future__ import annotations

import html

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from queues import stores
from webhooks.models import Notification, Webhook
from webhooks.notifying import notify

from .test_notifications import failed_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="a-long-admin-password"))
    return client


@pytest.mark.parametrize("model", ["webhook", "notification", "delivery"])
def test_every_admin_page_opens(admin_client, hooked_queue, receiver, model):
    receiver.answers.append(500)
    failed_task(hooked_queue)
    notify(stores.router(), now=timezone.now())
    assert admin_client.get(f"/admin/webhooks/{model}/").status_code == 200
    # the row's own key: PostgreSQL's sequences do not restart between tests
    pk = apps.get_model("webhooks", model).objects.values_list("pk", flat=True).first()
    change = admin_client.get(f"/admin/webhooks/{model}/{pk}/change/")
    assert change.status_code == 200


def test_the_secret_is_shown_and_a_refused_url_is_refused(admin_client, hooked_queue):
    hook = Webhook.objects.get()
    page = admin_client.get(f"/admin/webhooks/webhook/{hook.pk}/change/").content.decode()
    assert hook.secret in page and "HMAC-SHA256" in page
    other = hooked_queue.__class__.objects.create(host=hooked_queue.host, name="other")
    form = {"queue": other.pk, "url": "ftp://10.0.0.1/x", "notify_failed": "on",
            "pending_threshold": "0"}  # fmt: skip
    response = admin_client.post("/admin/webhooks/webhook/add/", form)
    assert response.status_code == 200
    assert "Only http and https URLs are called, not ftp" in html.unescape(
        response.content.decode()
    )
    assert Webhook.objects.count() == 1


def test_a_threshold_not_in_ascii_digits_is_refused(admin_client, hooked_queue):
    other = hooked_queue.__class__.objects.create(host=hooked_queue.host, name="other")
    form = {
        "queue": other.pk,
        "url": "https://hooks.example.com/x",
        "notify_failed": "on",
        "pending_threshold": "\u0661\u0660\u0660",  # 100 in Arabic-Indic digits
    }
    response = admin_client.post("/admin/webhooks/webhook/add/", form)
    assert response.status_code == 200
    assert "Enter a whole number in the digits 0-9" in response.content.decode()
    assert Webhook.objects.count() == 1


def test_the_new_secret_action_changes_it(admin_client, hooked_queue):
    hook = Webhook.objects.get()
    admin_client.post("/admin/webhooks/webhook/",
                      {"action": "new_secrets", "_selected_action": [hook.pk]})  # fmt: skip
    assert Webhook.objects.get().secret != hook.secret


def test_the_queue_page_lists_notifications_and_each_try(admin_client, hooked_queue, receiver):
    receiver.answers.append(500)
    task = failed_task(hooked_queue)
    now = timezone.now()
    notify(stores.router(), now=now)
    note = Notification.objects.get()
    notify(stores.router(), now=note.next_try_at)
    page = admin_client.get(f"/console/{hooked_queue.host.name}/{hooked_queue.name}/")
    text = html.unescape(page.content.decode())
    assert receiver.url in text
    assert f"/console/{hooked_queue.host.name}/{hooked_queue.name}/{task.id}/" in text
    assert "1 at" in text and "500 answered 500 Internal Server Error" in text
    assert "2 at" in text and ": 200" in text
    assert "delivered" in text
    assert Webhook.objects.get().secret not in text  # the secret is the admin's, not the console's


def test_the_queue_page_without_a_webhook_says_how_to_add_one(admin_client, make_queue):
    queue = make_queue()
    page = admin_client.get(f"/console/{queue.host.name}/{queue.name}/").content.decode()
    assert "No webhook" in page
