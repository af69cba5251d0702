"""The admin for webhooks, their notifications and every delivery try: thin classes."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from queues.validators import INTEGERS_IN_DIGITS

from .models import Delivery, Notification, Webhook
from .signing import new_secret

VERIFY_HELP = (
    "Each call is a POST of JSON with the headers Taskhoster-Timestamp and Taskhoster-Signature "
    "(sha256= and the hex HMAC-SHA256, keyed with the secret, of the timestamp, a dot and the "
    "body). Failed tries are retried after 10 s, 1 min, 5 min and 30 min: five tries in all."
)


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    formfield_overrides = INTEGERS_IN_DIGITS
    list_display = ("queue", "url", "notify_failed", "pending_threshold", "pending_alerted")
    list_select_related = ("queue__host",)
    search_fields = ("queue__name", "queue__host__name", "url")
    autocomplete_fields = ("queue",)
    readonly_fields = ("secret", "pending_alerted", "created_at")
    fieldsets = (
        (None, {"fields": ("queue", "url", "secret")}),
        ("Call when", {"fields": ("notify_failed", "pending_threshold", "pending_alerted")}),
        ("Receiving", {"description": VERIFY_HELP, "fields": ("created_at",)}),
    )
    actions = ["new_secrets"]

    @admin.action(description="Give the selected webhooks a new secret")
    def new_secrets(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        hooks = list(queryset)
        for hook in hooks:  # one secret each: a shared one would let one receiver forge another's
            hook.secret = new_secret()
            hook.save(update_fields=["secret"])
        self.message_user(
            request, f"{len(hooks)} webhook(s) have a new secret: update the receivers."
        )


class DeliveryInline(admin.TabularInline):
    model = Delivery
    fields = ("attempt", "sent_at", "url", "status_code", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "kind", "webhook", "task_id", "state", "tries", "next_try_at")
    list_filter = ("state", "kind", "webhook__queue__host")
    list_select_related = ("webhook__queue__host",)
    search_fields = ("task_id", "webhook__queue__name")
    readonly_fields = ("webhook", "kind", "task_id", "source", "body", "state", "tries",
                       "next_try_at", "created_at")  # fmt: skip
    inlines = [DeliveryInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made by the sweep from the event log, never by hand


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("sent_at", "notification", "attempt", "status_code", "error")
    list_filter = ("status_code",)
    list_select_related = ("notification__webhook__queue__host",)
    readonly_fields = ("notification", "attempt", "sent_at", "url", "status_code", "error")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
