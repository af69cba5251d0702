"""Who is calling which queue: resolved once per request, refusing with the uniform 404.

Every role check goes through queues.auth.access. A caller with no role on a queue (and no public
posting there) gets exactly what a missing queue gets; an anonymous caller is asked to log in
first, whether the queue exists or not, so that answer says nothing either.
"""

from dataclasses import dataclass

from rest_framework.exceptions import NotAuthenticated, NotFound, PermissionDenied
from rest_framework.request import Request

from queues.api import memo
from queues.auth.access import HeldRoles, User, held_roles, public_queues
from queues.models import Queue, Role
from queues.store import InvalidName, Task, paths
from queues.store.settings import QueueSettings


@dataclass(frozen=True, kw_only=True)
class QueueContext:
    host: str
    queue: str
    settings: QueueSettings
    roles: frozenset[str]
    caller: str | None  # the user name that becomes postedBy; None for an anonymous caller
    authenticated: bool

    @property
    def operator(self) -> bool:
        return Role.OPERATOR in self.roles

    def require(self, *roles: str, hint: str = "") -> None:
        """Refuse a caller that can see the queue but holds none of `roles` on it, naming the
        roles that would do (the caller may see the queue, so naming them tells it nothing)."""
        if self.roles.intersection(roles):
            return
        if not self.authenticated:
            raise NotAuthenticated()
        needed = " or ".join(roles)
        held = ", ".join(sorted(self.roles)) or "none (posting only: the queue is public)"
        raise PermissionDenied(
            f"This needs the {needed} role on {self.host}/{self.queue}; your roles there: "
            f"{held}.{' ' + hint if hint else ''}"
        )

    def may_see(self, task: Task) -> bool:
        """Operators see every task; a producer its own; anyone a publicly posted one."""
        if task.posted_by is None or self.operator:
            return True
        return Role.PRODUCER in self.roles and task.posted_by == self.caller

    def stamps_fetch(self, task: Task) -> bool:
        """Only the producer's own read marks a result fetched; an operator's look does not."""
        if task.posted_by is None:
            return not self.operator
        return task.posted_by == self.caller

    def check_visible(self, task: Task) -> Task:
        if not self.may_see(task):
            raise NotFound()
        return task


def resolve(request: Request, host: str, queue: str) -> QueueContext:
    """The queue named by the URL and the caller's roles on it, or the uniform refusal.

    The queue is looked up only once the caller holds a role on it (or it takes anyone's
    posts): a name it may not use is refused from what the caller holds alone, at the same
    cost whether that queue exists or not, so neither the answer nor its time tells."""
    user = request.user
    roles = _roles(user).on(host, queue)
    found = _queue(host, queue) if roles or (host, queue) in _public() else None
    if found is None or not (roles or found[1].public_post):
        if not user.is_authenticated:
            raise NotAuthenticated()
        raise NotFound()
    return QueueContext(
        host=host,
        queue=queue,
        settings=found[1],
        roles=roles,
        caller=user.get_username() if user.is_authenticated else None,
        authenticated=bool(user.is_authenticated),
    )


def _queue(host: str, queue: str) -> tuple[Queue, QueueSettings] | None:
    """The queue's row and settings, memoized (queues.api.memo) only when it exists."""
    found = memo.queues.get((host, queue))
    if found is not None:
        return found
    try:
        # Validate before the database sees the name: PostgreSQL refuses a NUL in a string.
        paths.validate_host(host)
        paths.validate_queue(queue)
    except InvalidName:
        return None
    row = Queue.objects.select_related("host").filter(host__name=host, name=queue).first()
    if row is None:
        return None
    found = (row, row.to_settings())
    memo.queues.put((host, queue), found)
    return found


ANONYMOUS = HeldRoles({})


def _roles(user: User) -> HeldRoles:
    """The caller's roles on every queue, memoized per user (queues.api.memo)."""
    if not user.is_authenticated:
        return ANONYMOUS
    found: HeldRoles | None = memo.roles.get(user.pk)
    if found is None:
        found = held_roles(user)
        memo.roles.put(user.pk, found)
    return found


def _public() -> frozenset[tuple[str, str]]:
    """The queues that take anyone's posts, memoized (as a whole, whatever name is asked)."""
    found: frozenset[tuple[str, str]] | None = memo.public.get(memo.PUBLIC)
    if found is None:
        found = public_queues()
        memo.public.put(memo.PUBLIC, found)
    return found
