import pytest
from django.contrib.auth.models import AnonymousUser, Group, User

from queues.auth.access import has_role, operated_queues, queues_with_role, roles_on
from queues.models import QueueAccess

pytestmark = pytest.mark.django_db


@pytest.fixture
def queues(make_queue):
    return make_queue("a.example", "one"), make_queue("a.example", "two"), make_queue("b.example")


def test_user_roles_come_from_their_own_grants(queues):
    one, two, _ = queues
    alice = User.objects.create(username="alice")
    QueueAccess.objects.create(queue=one, user=alice, role="producer")
    QueueAccess.objects.create(queue=one, user=alice, role="worker")
    assert roles_on(alice, one) == {"producer", "worker"}
    assert roles_on(alice, two) == frozenset()
    assert not has_role(alice, one, "operator")


def test_group_grants_reach_members_only(queues):
    _, two, _ = queues
    crew = Group.objects.create(name="crew")
    bob, eve = User.objects.create(username="bob"), User.objects.create(username="eve")
    bob.groups.add(crew)
    QueueAccess.objects.create(queue=two, group=crew, role="operator")
    assert has_role(bob, two, "operator")
    assert not has_role(eve, two, "operator")
    assert list(operated_queues(bob)) == [two]
    assert not operated_queues(eve).exists()


def test_staff_operate_everything_and_anonymous_nothing(queues):
    staff = User.objects.create(username="root", is_staff=True)
    assert roles_on(staff, queues[2]) == {"producer", "worker", "operator"}
    assert operated_queues(staff).count() == 3
    assert roles_on(AnonymousUser(), queues[0]) == frozenset()
    assert not queues_with_role(AnonymousUser(), "producer").exists()


def test_inactive_users_hold_no_role(queues):
    alice = User.objects.create(username="alice", is_active=False)
    QueueAccess.objects.create(queue=queues[0], user=alice, role="worker")
    assert roles_on(alice, queues[0]) == frozenset()
    assert not queues_with_role(alice, "worker").exists()
