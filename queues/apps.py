"""The queues app's configuration: a saved queue or host forgets its cached store kind."""

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues and access"

    def ready(self) -> None:
        from queues.models import STORE_RULES, Host, Queue
        from queues.stores.choice import check_store_change
        from queues.stores.kinds import forget_kinds

        if check_store_change not in STORE_RULES:
            STORE_RULES.append(check_store_change)

        # the router keeps each queue's store kind; a saved queue (or a renamed host) may
        # have changed it
        for model in (Queue, Host):
            post_save.connect(forget_kinds, sender=model, dispatch_uid=f"forget_kinds_{model}")
            post_delete.connect(forget_kinds, sender=model, dispatch_uid=f"forget_kinds_d{model}")
