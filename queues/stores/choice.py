"""The rules on a queue's `store` setting, shared by the admin form and `createqueue`
(both reach them through Queue.full_clean, which has them from the app's ready())."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from queues.models import Queue, StoreKind
from queues.store import NotFound
from queues.stores.opening import router
from queues.stores.pg_location import UNAVAILABLE, pg_location


def check_store_change(queue: Queue) -> None:
    """ValidationError on `store` when the PostgreSQL store is chosen without a database for
    it, or when the store changes while the old store holds pending or processing tasks."""
    if queue.store == StoreKind.POSTGRES and pg_location() is None:
        raise ValidationError({"store": UNAVAILABLE})
    if queue.pk is None:
        return
    saved = Queue.objects.select_related("host").filter(pk=queue.pk).first()
    if saved is None or saved.store == queue.store:
        return
    in_flight = _in_flight(saved.store, saved.host.name, saved.name)
    if in_flight:
        raise ValidationError(
            {
                "store": f"The queue has {in_flight} pending or processing task"
                f"{'s' if in_flight != 1 else ''} in its {saved.store} store: a change of "
                "store now would leave them where no claim looks. Change it once they have "
                "ended (or cancel them)."
            }
        )


def _in_flight(kind: str, host: str, name: str) -> int:
    try:
        stats = router().backend(kind).stats(host, name)
    except NotFound:  # never posted to: nothing on disk, nothing in flight
        return 0
    return stats.pending + stats.processing
