"""A short-lived per-process memo of who is calling and what they may do on which queue.

Without it every API request paid three queries (the token, the queue, the caller's roles)
before any work: most of a claim's time. Entries live at most `TASKHOSTER_API_MEMO_SECONDS`
(default 2 s; 0 turns the memo off), so a revoked token, a deactivated user, a removed grant
or a changed queue setting takes effect in every server process within that bound. In the
process that saved the change it takes effect at once: any save or delete of a host, queue,
grant, token, user or group membership empties this process's memo (the admin's "revoke"
action saves each token for that reason). A bulk `update()` sends no signal, so only the
bound holds for it.

A token's expiry is checked on every request against the memoized row, so it is exact. Only
usable tokens and existing queues are memoized: a guessed token or queue name never is. A
queue is looked up by its name only for a caller that holds a role on it (or when it takes
anyone's posts): the caller's roles are memoized by name, so a name it holds nothing on costs
the same whether that queue exists, is another tenant's, or is not there at all.
"""

import threading
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_delete, post_save

from queues.models import ApiToken, Host, Queue, QueueAccess

# Valid tokens and (user, queue) pairs are few; the cap only bounds a pathological process.
MAX_ENTRIES = 10_000


class Memo:
    """A dict whose entries expire; thread-safe (gthread serves requests on many threads)."""

    def __init__(self) -> None:
        self._entries: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, *, now: float | None = None) -> Any | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= (time.monotonic() if now is None else now):
            return None
        return entry[1]

    def put(self, key: Any, value: Any, *, now: float | None = None) -> None:
        seconds = float(settings.TASKHOSTER_API_MEMO_SECONDS)
        if seconds <= 0:
            return
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = ((time.monotonic() if now is None else now) + seconds, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


tokens = Memo()  # sha256 of the token -> its ApiToken row, with .user loaded
queues = Memo()  # (host, queue) -> the Queue row, with .host loaded
roles = Memo()  # user pk -> its HeldRoles (queues.auth.access): its roles by queue name
public = Memo()  # PUBLIC -> frozenset of the (host, queue) names that take anyone's posts
PUBLIC = "public"


def forget_all(**_: Any) -> None:
    for memo in (tokens, queues, roles, public):
        memo.clear()


for _model in (Host, Queue, QueueAccess, ApiToken, get_user_model(), Group):
    post_save.connect(forget_all, sender=_model, dispatch_uid=f"memo-save-{_model.__name__}")
    post_delete.connect(forget_all, sender=_model, dispatch_uid=f"memo-delete-{_model.__name__}")
m2m_changed.connect(forget_all, sender=get_user_model().groups.through, dispatch_uid="memo-groups")
