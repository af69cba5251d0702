import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from queues.models import ApiToken, Host, Queue, QueueAccess
from queues.store.settings import QueueSettings

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "name",
    ["task.example.com", "localhost", "a", "x-1.y-2.example", "a" * 63 + ".com", "0.example"],
)
def test_host_accepts_dns_names(name):
    Host(name=name).full_clean()


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Task.example.com",
        "..",
        "a..b",
        ".a",
        "a.",
        "a/b",
        "a_b.com",
        "exa mple.com",
        "a" * 64 + ".com",
        ".".join(["a" * 63] * 4) + ".toolong",
        "t\u0430sk.example.com",  # Cyrillic a: a look-alike
        "a\x00b",
    ],
)
def test_host_refuses_what_is_not_a_dns_name(name):
    with pytest.raises(ValidationError) as caught:
        Host(name=name).full_clean()
    assert "name" in caught.value.message_dict


@pytest.fixture
def host():
    return Host.objects.create(name="task.example.com")


@pytest.mark.parametrize("name", ["resize", "r", "a-b_c", "0queue", "q" * 64])
def test_queue_accepts_valid_names(host, name):
    Queue(host=host, name=name).full_clean()


@pytest.mark.parametrize("name", ["", "Resize", "-q", "_q", "a/b", "..", "q" * 65, "q.x", "é"])
def test_queue_refuses_invalid_names(host, name):
    with pytest.raises(ValidationError) as caught:
        Queue(host=host, name=name).full_clean()
    assert "name" in caught.value.message_dict


def test_queue_defaults_are_store_md_defaults(host):
    queue = Queue(host=host, name="q")
    queue.full_clean()
    assert queue.to_settings() == QueueSettings()


def test_queue_refuses_lease_longer_than_queue_timeout(host):
    queue = Queue(host=host, name="q", queue_seconds=30, lease_seconds=60)
    with pytest.raises(ValidationError) as caught:
        queue.full_clean()
    assert "outlives the queue timeout" in caught.value.message_dict["lease_seconds"][0]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_attempts", 9),
        ("queue_seconds", 0),
        ("lease_seconds", 0),
        ("max_item_bytes", 1),
        ("backoff_factor", 0),
        ("item_schema", {"type": "no-such-type"}),
        ("item_schema", ["not", "an", "object"]),
        ("retain_from", "whenever"),
    ],
)
def test_queue_refuses_out_of_range_settings(host, field, value):
    queue = Queue(host=host, name="q", **{field: value})
    with pytest.raises(ValidationError) as caught:
        queue.full_clean()
    assert field in caught.value.message_dict


def test_queue_refuses_backoff_cap_below_first_delay(host):
    queue = Queue(host=host, name="q", backoff_seconds=60, backoff_cap_seconds=10)
    with pytest.raises(ValidationError) as caught:
        queue.full_clean()
    assert "backoff_cap_seconds" in caught.value.message_dict


def test_queue_refuses_max_retention_below_retention_under_fetched(host):
    queue = Queue(
        host=host, name="q", retain_from="fetched", retain_seconds=7200, max_retain_seconds=3600
    )
    with pytest.raises(ValidationError) as caught:
        queue.full_clean()
    assert "max_retain_seconds" in caught.value.message_dict


def test_queue_accepts_a_valid_item_schema_and_passes_it_to_the_store(host):
    schema = {"type": "object", "required": ["url"]}
    queue = Queue(host=host, name="q", item_schema=schema, max_attempts=3)
    queue.full_clean()
    assert queue.to_settings().item_schema == schema
    assert queue.to_settings().max_attempts == 3


def test_queue_names_are_unique_per_host(host):
    Queue.objects.create(host=host, name="q")
    other = Host.objects.create(name="other.example.com")
    Queue.objects.create(host=other, name="q")
    with pytest.raises(ValidationError):
        Queue(host=host, name="q").full_clean()


def test_access_needs_exactly_one_of_user_and_group(host):
    queue = Queue.objects.create(host=host, name="q")
    user = User.objects.create(username="alice")
    group = Group.objects.create(name="crew")
    with pytest.raises(ValidationError):
        QueueAccess(queue=queue, role="worker").full_clean()
    with pytest.raises(ValidationError):
        QueueAccess(queue=queue, user=user, group=group, role="worker").full_clean()
    with pytest.raises(IntegrityError):
        QueueAccess.objects.create(queue=queue, role="worker")


def test_access_refuses_an_unknown_role(host):
    queue = Queue.objects.create(host=host, name="q")
    user = User.objects.create(username="alice")
    with pytest.raises(ValidationError) as caught:
        QueueAccess(queue=queue, user=user, role="admin").full_clean()
    assert "role" in caught.value.message_dict


def test_token_usability(host):
    from datetime import timedelta

    from django.utils import timezone

    user = User.objects.create(username="alice")
    now = timezone.now()
    token = ApiToken(user=user, name="t", prefix="abcd1234", token_hash="0" * 64)
    assert token.is_usable(now)
    token.expires_at = now - timedelta(seconds=1)
    assert not token.is_usable(now)
    token.expires_at = None
    token.revoked_at = now
    assert not token.is_usable(now)


def test_every_queue_default_is_the_stores_own():
    """One truth for a queue's defaults: each model field's default is QueueSettings' default."""
    defaults = QueueSettings()
    for name in QueueSettings.__dataclass_fields__:
        field = Queue._meta.get_field(name)
        assert field.get_default() == getattr(defaults, name), name


def test_a_new_queue_has_an_attempt_budget_of_three(host):
    queue = Queue.objects.create(host=host, name="q")
    assert queue.max_attempts == 3
    assert queue.to_settings() == QueueSettings()
