from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from queues.auth.tokens import find_token, issue_token, revoke_token
from queues.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return User.objects.create(username="alice")


def test_issued_token_is_found_and_stored_only_hashed(alice):
    record, token = issue_token(alice, "box-1")
    assert find_token(token) == record
    dump = "\n".join(connection.connection.iterdump()) if connection.vendor == "sqlite" else None
    stored = ApiToken.objects.values_list("prefix", "token_hash", "name").get()
    assert token not in " ".join(stored)
    if dump is not None:
        assert token not in dump
        assert token.split("_", 2)[2] not in dump


@pytest.mark.parametrize(
    "presented",
    ["", "Bearer", "th_", "th_zzzzzzzz_" + "a" * 43, "nonsense", "th_00000000_" + "a" * 43],
)
def test_malformed_or_unknown_tokens_are_refused(alice, presented):
    issue_token(alice, "box-1")
    assert find_token(presented) is None


def test_a_token_with_a_wrong_secret_is_refused(alice):
    _, token = issue_token(alice, "box-1")
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert find_token(forged) is None


def test_revoked_and_expired_tokens_are_refused(alice):
    record, token = issue_token(alice, "box-1")
    revoke_token(record)
    assert find_token(token) is None
    _, expiring = issue_token(alice, "short", expires_at=timezone.now() + timedelta(hours=1))
    assert find_token(expiring) is not None
    assert find_token(expiring, now=timezone.now() + timedelta(hours=2)) is None


def test_an_inactive_users_token_is_refused(alice):
    _, token = issue_token(alice, "box-1")
    alice.is_active = False
    alice.save()
    assert find_token(token) is None


def test_last_used_is_written_at_most_once_a_minute(alice):
    record, token = issue_token(alice, "box-1")
    start = timezone.now()
    find_token(token, now=start)
    record.refresh_from_db()
    assert record.last_used_at == start
    find_token(token, now=start + timedelta(seconds=30))
    record.refresh_from_db()
    assert record.last_used_at == start
    later = start + timedelta(minutes=2)
    find_token(token, now=later)
    record.refresh_from_db()
    assert record.last_used_at == later
