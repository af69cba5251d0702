"""Who may do what on which queue: the one place roles are read.

Roles come from `QueueAccess` rows for the user or any of the user's groups; staff and
superusers are operators of every queue. Callers that find no role must answer exactly as for
a queue that does not exist (the tenant rule), so nothing here says which one it was.
"""

from dataclasses import dataclass

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


NO_ROLES: frozenset[str] = frozenset()


@dataclass(frozen=True)
class HeldRoles:
    """What one user holds, by (host, queue) name: `by_name`, or every role everywhere."""

    by_name: dict[tuple[str, str], frozenset[str]]
    everywhere: bool = False  # staff and superusers

    def on(self, host: str, queue: str) -> frozenset[str]:
        if self.everywhere:
            return frozenset(Role.values)
        return self.by_name.get((host, queue), NO_ROLES)


def held_roles(user: User) -> HeldRoles:
    """The roles `user` holds on every queue, in one query (none for staff). Read without
    looking a queue up by a name asked, so that a name the user holds nothing on costs the
    same whether such a queue exists or not."""
    if not user.is_authenticated or not user.is_active:
        return HeldRoles({})
    if user.is_staff or user.is_superuser:
        return HeldRoles({}, everywhere=True)
    held: dict[tuple[str, str], set[str]] = {}
    grants = QueueAccess.objects.filter(_grants(user))
    for host, queue, role in grants.values_list("queue__host__name", "queue__name", "role"):
        held.setdefault((host, queue), set()).add(role)
    return HeldRoles({name: frozenset(roles) for name, roles in held.items()})


def public_queues() -> frozenset[tuple[str, str]]:
    """Every queue that takes posts from anyone, by (host, queue) name: anyone may learn these
    by posting, so they are no secret."""
    found = Queue.objects.filter(public_post=True).values_list("host__name", "name")
    return frozenset((str(host), str(name)) for host, name in found)


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
