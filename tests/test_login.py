"""Operators who are not staff log in to the console (the admin's login refuses them)."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queues.models import QueueAccess

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
