"""Who may do what on which queue: the one place roles are read.

Roles come from `QueueAccess` rows for the user or any of the user's groups; staff and
superusers are operators of every queue. Callers that find no role must answer exactly as for
a queue that does not exist (the tenant rule), so nothing here says which one it was.
"""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from queues.models import Queue, QueueAccess, Role

User = AbstractBaseUser | AnonymousUser


def _grants(user: User) -> Q:
    return Q(user_id=user.pk) | Q(group__in=user.groups.all())


def roles_on(user: User, queue: Queue) -> frozenset[str]:
    """The roles `user` holds on `queue` (operator for staff)."""
    if not user.is_authenticated or not user.is_active:
        return frozenset()
    if user.is_staff or user.is_superuser:
        return frozenset(Role.values)
    found = QueueAccess.objects.filter(_grants(user), queue=queue).values_list("role", flat=True)
    return frozenset(found)


def has_role(user: User, queue: Queue, role: str) -> bool:
    return role in roles_on(user, queue)


def queues_with_role(user: User, role: str) -> QuerySet[Queue]:
    """Every queue on which `user` holds `role`; all of them for staff."""
    queues = Queue.objects.select_related("host")
    if not user.is_authenticated or not user.is_active:
        return queues.none()
    if user.is_staff or user.is_superuser:
        return queues.all()
    granted = QueueAccess.objects.filter(_grants(user), role=role).values("queue_id")
    return queues.filter(pk__in=granted)


def operated_queues(user: User) -> QuerySet[Queue]:
    return queues_with_role(user, Role.OPERATOR)


def roles_by_queue(user: User) -> list[tuple[Queue, frozenset[str]]]:
    """Every queue on which `user` holds a role, with those roles (all of them for staff), in
    the queues' order. Nothing for an anonymous or inactive user."""
    if not user.is_authenticated or not user.is_active:
        return []
    queues = Queue.objects.select_related("host")
    if user.is_staff or user.is_superuser:
        return [(queue, frozenset(Role.values)) for queue in queues]
    held: dict[int, set[str]] = {}
    for queue_id, role in QueueAccess.objects.filter(_grants(user)).values_list("queue_id", "role"):
        held.setdefault(queue_id, set()).add(role)
    return [(queue, frozenset(held[queue.pk])) for queue in queues.filter(pk__in=held)]
