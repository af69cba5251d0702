"""The admin an operator who never read the code uses: every page opens, tokens show once."""

import base64
import contextlib
import re
import zlib

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues.auth.tokens import find_token, issue_token
from queues.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client():
    user = User.objects.create_superuser("root", password="a-long-admin-password")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("model", ["host", "queue", "queueaccess", "apitoken"])
def test_every_admin_page_opens(admin_client, make_queue, model):
    make_queue()
    assert admin_client.get(f"/admin/queues/{model}/").status_code == 200
    assert admin_client.get(f"/admin/queues/{model}/add/").status_code == 200


def test_queue_form_groups_and_explains_the_settings(admin_client, make_queue):
    queue = make_queue()
    page = admin_client.get(f"/admin/queues/queue/{queue.pk}/change/").content.decode()
    for heading in ("Time limits", "Retries", "Retention and history", "Limits and posting"):
        assert heading in page
    assert "A task that waits or runs longer than the queue timeout fails" in page
    assert "A task older than this fails with error" in page  # the field's own help text


def shown_token(page: str) -> str:
    (token,) = set(re.findall(r"th_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", page))
    return token


def cookie_texts(value: str) -> list[str]:
    """A cookie's value and whatever its parts decode to (base64, then zlib when compressed),
    which is how the messages cookie carried the token."""
    texts = [value]
    for part in re.split(r"[:.]", value):
        for decode in (base64.urlsafe_b64decode, base64.b64decode):
            try:
                raw = decode(part + "=" * (-len(part) % 4))
            except ValueError:
                continue
            with contextlib.suppress(zlib.error):
                raw = zlib.decompress(raw)
            texts.append(raw.decode("latin-1"))
    return texts


def test_a_token_added_in_the_admin_is_shown_once_and_works(admin_client):
    box = User.objects.create_user("box-1")
    response = admin_client.post("/admin/queues/apitoken/add/", {"user": box.pk, "name": "worker"})
    assert response.status_code == 200  # shown on the answer to the save itself
    page = response.content.decode()
    token = shown_token(page)
    assert page.count(token) == 1
    assert "Copy it now" in page
    assert "no-store" in response["Cache-Control"]
    assert find_token(token).user == box
    again = admin_client.get("/admin/queues/apitoken/").content.decode()
    assert token not in again
    record = ApiToken.objects.get()
    assert (
        token
        not in admin_client.get(f"/admin/queues/apitoken/{record.pk}/change/").content.decode()
    )


def test_a_token_name_holding_a_bidi_override_is_refused_in_the_admin(admin_client):
    box = User.objects.create_user("box-1")
    response = admin_client.post(
        "/admin/queues/apitoken/add/", {"user": box.pk, "name": "box\u202e1"}
    )
    assert response.status_code == 200
    assert "U+202E at position 3" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_a_new_token_never_travels_in_a_cookie(admin_client):
    box = User.objects.create_user("box-1")
    answers = [admin_client.post("/admin/queues/apitoken/add/", {"user": box.pk, "name": "w"})]
    while answers[-1].status_code == 302:  # today's answer is the page; a redirect is followed
        answers.append(admin_client.get(answers[-1]["Location"]))
    token = shown_token(answers[-1].content.decode())
    secret = token.split("_", 2)[2]
    for answer in answers:
        for header, value in answer.items():
            assert secret not in value, header
        for name, cookie in answer.cookies.items():
            for text in cookie_texts(cookie.value):
                assert secret not in text, f"Set-Cookie: {name}={cookie.value}"


def test_the_revoke_action_stops_the_tokens(admin_client):
    box = User.objects.create_user("box-1")
    first, token = issue_token(box, "a")
    issue_token(box, "b")
    assert find_token(token) is not None
    admin_client.post(
        "/admin/queues/apitoken/",
        {"action": "revoke", "_selected_action": [first.pk]},
        follow=True,
    )
    assert find_token(token) is None
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 1


def test_the_admin_refuses_a_lease_longer_than_the_queue_timeout(admin_client, make_queue):
    queue = make_queue()
    form = {
        "host": queue.host.pk, "name": queue.name, "queue_seconds": 30, "lease_seconds": 60,
        "retain_seconds": 3600, "retain_from": "finished", "max_retain_seconds": 604800,
        "max_attempts": 0, "backoff_seconds": 5, "backoff_factor": 4, "backoff_cap_seconds": 300,
        "max_item_bytes": 65536, "max_pending": 0,
        "access-TOTAL_FORMS": 0, "access-INITIAL_FORMS": 0,
    }  # fmt: skip
    page = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", form).content.decode()
    assert "outlives the queue timeout" in page
    queue.refresh_from_db()
    assert queue.lease_seconds == 60 and queue.queue_seconds == 86400


def test_the_admins_new_queue_form_offers_the_stores_defaults(admin_client):
    page = admin_client.get("/admin/queues/queue/add/").content.decode()
    assert 'name="max_attempts" value="3"' in page
    assert 'name="lease_seconds" value="60"' in page


def queue_form(queue, **changes):
    """The queue change form as the admin posts it, with `changes` over the saved values."""
    form = {
        "host": queue.host.pk, "name": queue.name, "queue_seconds": 86400, "lease_seconds": 60,
        "retain_seconds": 3600, "retain_from": "finished", "max_retain_seconds": 604800,
        "max_attempts": 0, "backoff_seconds": 5, "backoff_factor": 4, "backoff_cap_seconds": 300,
        "max_item_bytes": 65536, "max_pending": 0, "item_schema": "", "store": "files",
        "rate_count": 0, "rate_seconds": 1, "max_processing": 0, "max_per_key": 0,
        "access-TOTAL_FORMS": 0, "access-INITIAL_FORMS": 0,
    }  # fmt: skip
    return {**form, **changes}


def test_the_login_page_and_the_header_say_taskhoster():
    login = Client().get("/admin/login/").content.decode()
    assert "Django administration" not in login and "Django site admin" not in login
    assert "<title>Log in | taskhoster admin</title>" in login
    assert '<a href="/admin/">taskhoster</a>' in login


def test_the_admin_links_to_the_console(admin_client, make_queue):
    index = admin_client.get("/admin/").content.decode()
    assert '<a href="/">Console</a>' in index
    assert '<a href="/logs/">Task logs</a>' in index


def test_the_queue_form_links_to_the_queues_console_page(admin_client, make_queue):
    queue = make_queue()
    page = admin_client.get(f"/admin/queues/queue/{queue.pk}/change/").content.decode()
    assert 'href="/console/task.example.com/resize/"' in page
    # A queue being added has no console page yet.
    adding = admin_client.get("/admin/queues/queue/add/").content.decode()
    assert "Open in the console" not in adding


def test_an_empty_item_schema_shows_blank_and_saves_as_none(admin_client, make_queue):
    queue = make_queue()
    page = admin_client.get(f"/admin/queues/queue/{queue.pk}/change/").content.decode()
    textarea = page.split('id="id_item_schema">')[1].split("</textarea>")[0]
    assert textarea.strip() == ""
    response = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", queue_form(queue))
    assert response.status_code == 302
    queue.refresh_from_db()
    assert queue.item_schema is None


def test_a_schema_is_still_shown_and_saved(admin_client, make_queue):
    queue = make_queue(item_schema={"type": "object"})
    page = admin_client.get(f"/admin/queues/queue/{queue.pk}/change/").content.decode()
    assert "{&quot;type&quot;: &quot;object&quot;}" in page
    form = queue_form(queue, item_schema='{"type": "object", "required": ["url"]}')
    assert admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", form).status_code == 302
    queue.refresh_from_db()
    assert queue.item_schema == {"type": "object", "required": ["url"]}


def test_durations_read_as_words_beside_the_seconds(admin_client, make_queue):
    queue = make_queue()
    listing = admin_client.get("/admin/queues/queue/").content.decode()
    assert "86400 (1 day)" in listing and "60 (1 min)" in listing
    form = admin_client.get(f"/admin/queues/queue/{queue.pk}/change/").content.decode()
    field = form.split('id="id_queue_seconds"')[1].split("</div>")[0]
    assert "1 day" in field
    assert "7 days" in form.split('id="id_max_retain_seconds"')[1].split("</div>")[0]


def test_an_access_row_without_user_or_group_says_so_once_in_words(admin_client, make_queue):
    queue = make_queue()
    form = queue_form(queue, **{"access-TOTAL_FORMS": 1, "access-0-role": "operator"})
    page = admin_client.post(f"/admin/queues/queue/{queue.pk}/change/", form).content.decode()
    assert "Give the role to a user or to a group, not both or neither." in page
    assert "access_for_user_xor_group" not in page
    assert not queue.access.exists()
