"""The failure notifications app's configuration and its system check of time limits."""

from django.apps import AppConfig
from django.core import checks


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Failure notifications"

    def ready(self) -> None:
        from .checks import check_time_limits

        checks.register(check_time_limits)
