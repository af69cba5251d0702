"""What a login writes to the server's log from the lockout (django-axes): one line for the login
that locks, none for any other. The settings' LOGGING is the one Django configured at start."""

import logging

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def axes_lines():
    """The lines the axes loggers pass on, as the server's handlers would get them: through
    the loggers' own levels, which LOGGING set."""
    kept = Kept()
    root = logging.getLogger()
    root.addHandler(kept)
    yield kept.lines
    root.removeHandler(kept)


def log_in(password: str) -> int:
    return Client().post("/login/", {"username": "olga", "password": password}).status_code


def test_a_login_writes_no_lockout_line_and_the_one_that_locks_writes_one(axes_lines, settings):
    User.objects.create_user("olga", password="a-long-operator-password")
    assert log_in("a-long-operator-password") == 302
    assert log_in("wrong") == 200  # counted, in the database; no line
    assert [line for line in axes_lines if line.startswith("AXES")] == []
    settings.AXES_FAILURE_LIMIT = 2
    log_in("wrong")  # the second failure locks the user out
    said = [line for line in axes_lines if line.startswith("AXES")]
    assert len(said) == 1 and "Locking out" in said[0], said
