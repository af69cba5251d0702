"""Operators who are not staff log in to the console (the admin's login refuses them)."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.utils import timezone

from queues.auth.tokens import issue_token
from queues.models import QueueAccess
from queues.web.login_throttle import forwarded_address, locked_out

pytestmark = pytest.mark.django_db


@pytest.fixture
def olga(make_queue):
    user = User.objects.create_user("olga", password="a-long-operator-password")
    QueueAccess.objects.create(queue=make_queue(), user=user, role="operator")
    return user


def test_the_console_sends_people_to_its_own_login_page():
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/"


def test_an_operator_who_is_not_staff_logs_in_and_sees_the_queue(olga):
    client = Client(enforce_csrf_checks=True)
    page = client.get("/login/?next=/").content.decode()
    assert "csrfmiddlewaretoken" in page and "taskhoster" in page
    token = client.cookies["csrftoken"].value
    response = client.post("/login/?next=/", {
        "username": "olga", "password": "a-long-operator-password",
        "next": "/", "csrfmiddlewaretoken": token,
    })  # fmt: skip
    assert response.status_code == 302 and response["Location"] == "/"
    assert "task.example.com/<wbr>resize" in client.get("/").content.decode()


def test_a_wrong_password_is_refused_with_a_message(olga):
    response = Client().post("/login/", {"username": "olga", "password": "wrong"})
    assert response.status_code == 200
    assert "did not match" in response.content.decode()


def test_an_operator_logs_out_from_the_console(olga):
    client = Client()
    client.force_login(olga)
    page = client.get("/").content.decode()
    assert 'action="/logout/"' in page
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert client.get("/").status_code == 302


def test_login_form_needs_a_csrf_token(olga):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "olga", "password": "a-long-operator-password"})
    assert response.status_code == 403


# --- failed logins are throttled per user name and per address (django-axes) ---------------

LIMIT = 10  # TASKHOSTER_LOGIN_FAILURE_LIMIT's default
LOCKED = "Too many failed logins for this user or from this address"


def log_in(path: str, username: str, password: str, address: str = "127.0.0.1"):
    client = Client(REMOTE_ADDR=address)
    response = client.post(path, {"username": username, "password": password, "next": "/"})
    return client, response


def test_wrong_passwords_lock_the_user_out_and_the_form_says_until_when(olga):
    for _ in range(LIMIT - 1):
        _, response = log_in("/login/", "olga", "wrong")
        assert response.status_code == 200 and LOCKED not in response.content.decode()
    _, response = log_in("/login/", "olga", "wrong")
    page = response.content.decode()
    assert response.status_code == 429
    assert LOCKED in page and "locked for 15 minutes, until " in page and " UTC" in page
    assert 'name="password"' in page  # the form itself, to try again later
    client, response = log_in("/login/", "olga", "a-long-operator-password")
    assert response.status_code == 429 and LOCKED in response.content.decode()
    assert client.get("/").status_code == 302  # not logged in


def test_the_lockout_ends_after_its_cool_off(olga):
    for _ in range(LIMIT):
        log_in("/login/", "olga", "wrong")
    # the cool-off passed: the attempts' time moved back, as the clock would have moved on
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    client, response = log_in("/login/", "olga", "a-long-operator-password")
    assert response.status_code == 302
    assert client.get("/").status_code == 200


def test_one_address_trying_many_users_is_locked_out_and_others_are_not(olga):
    for n in range(LIMIT):
        log_in("/login/", f"guess{n}", "wrong", address="203.0.113.7")
    _, response = log_in("/login/", "olga", "a-long-operator-password", address="203.0.113.7")
    assert response.status_code == 429 and LOCKED in response.content.decode()
    _, response = log_in("/login/", "olga", "a-long-operator-password", address="198.51.100.2")
    assert response.status_code == 302


def test_one_user_tried_from_many_addresses_is_locked_out_everywhere(olga):
    for n in range(LIMIT):
        log_in("/login/", "olga", "wrong", address=f"203.0.113.{n + 1}")
    _, response = log_in("/login/", "olga", "a-long-operator-password", address="198.51.100.2")
    assert response.status_code == 429 and LOCKED in response.content.decode()


def test_a_good_login_forgets_the_failures_before_it(olga):
    for _ in range(2):
        for _ in range(LIMIT - 1):
            log_in("/login/", "olga", "wrong")
        _, response = log_in("/login/", "olga", "a-long-operator-password")
        assert response.status_code == 302


def test_the_admin_login_is_throttled_and_says_so_on_its_form():
    User.objects.create_superuser("root", password="a-long-admin-password")
    for _ in range(LIMIT):
        _, response = log_in("/admin/login/", "root", "wrong")
    page = response.content.decode()
    assert response.status_code == 429 and LOCKED in page and 'name="password"' in page
    client, response = log_in("/admin/login/", "root", "a-long-admin-password")
    assert response.status_code == 429
    assert client.get("/admin/").status_code == 302  # to the login page: not logged in


def test_a_locked_out_address_and_user_still_reach_the_api_with_a_token(olga):
    for _ in range(LIMIT):
        log_in("/login/", "olga", "wrong")
    _, token = issue_token(olga, "box-1")
    client = Client(REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.get("/api/v1/queues/task.example.com/resize/tasks")
    assert response.status_code == 200, response.content


def test_behind_a_proxy_the_address_is_the_one_the_proxy_appended():
    factory = RequestFactory()
    forged = factory.post("/login/", REMOTE_ADDR="10.0.0.1",
                          HTTP_X_FORWARDED_FOR="198.51.100.9, 203.0.113.5")  # fmt: skip
    assert forwarded_address(forged) == "203.0.113.5"
    assert forwarded_address(factory.post("/login/", REMOTE_ADDR="10.0.0.1")) == "10.0.0.1"


def test_a_lockout_met_outside_a_login_form_is_said_in_plain_text():
    request = RequestFactory().post("/elsewhere/", REMOTE_ADDR="10.0.0.1")
    response = locked_out(request, HttpResponse("the view's own answer"), {})
    assert response.status_code == 429 and response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith(LOCKED)


def test_a_lockout_without_a_cool_off_says_an_admin_lifts_it(settings):
    settings.AXES_COOLOFF_TIME = None  # axes then locks out until the attempts are deleted
    message = locked_out(RequestFactory().post("/login/"), None, {}).content.decode()
    assert message.startswith(LOCKED) and "Ask an admin" in message
