"""The admin for hosts, queues, access and tokens: thin classes over the models."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db import models
from django.db.models import QuerySet
from django.forms.models import construct_instance
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from queues.admin_forms.settings_preview import SettingsPreview, preview_settings
from queues.admin_forms.widgets import SECONDS_FIELDS, BlankableJSONField, SecondsInput
from queues.auth.tokens import issue_token, revoke_token
from queues.models import ApiToken, Host, Queue, QueueAccess
from queues.store import StoreError
from queues.text.durations import readable_seconds
from queues.validators import IntegerInDigits

admin.site.site_header = "taskhoster"
admin.site.site_title = "taskhoster admin"
admin.site.index_title = "Hosts, queues, access and tokens"


class QueueFields:
    """The queue's form fields as people read them: seconds with their words, a blank schema."""

    def formfield_for_dbfield(
        self, db_field: models.Field, request: HttpRequest, **kwargs: Any
    ) -> forms.Field | None:
        if db_field.name in SECONDS_FIELDS:
            kwargs["widget"] = SecondsInput
        if db_field.name == "item_schema":
            kwargs["form_class"] = BlankableJSONField
        if isinstance(db_field, models.IntegerField):
            kwargs["form_class"] = IntegerInDigits
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]


def seconds_column(field: str, heading: str) -> Any:
    """A list column showing a seconds setting as "86400 (1 day)", sortable by the field."""

    @admin.display(description=heading, ordering=field)
    def column(model_admin: admin.ModelAdmin, queue: Queue) -> str:
        seconds = getattr(queue, field)
        return f"{seconds} ({readable_seconds(seconds)})"

    return column


class QueueInline(QueueFields, admin.TabularInline):
    model = Queue
    fields = ("name", "queue_seconds", "lease_seconds", "paused")
    extra = 0
    show_change_link = True


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "queue_count", "created_at")
    search_fields = ("name", "description")
    inlines = [QueueInline]

    @admin.display(description="queues")
    def queue_count(self, host: Host) -> int:
        return host.queues.count()


class QueueAccessInline(admin.StackedInline):
    """Stacked: a table's row of the user's and the group's search boxes put Group and Role off
    a phone's screen, behind a sideways scroll."""

    model = QueueAccess
    fields = ("user", "group", "role")
    autocomplete_fields = ("user", "group")
    extra = 1


PREVIEW_BUTTON = "_preview_sweep"
# The settings the sweep's rules read from the queue (a lease's length and the attempt budget
# are stamped on each task when it is claimed or posted, so changing them acts on new ones only).
SWEEP_FIELDS = frozenset({"queue_seconds", "retain_seconds", "retain_from", "max_retain_seconds"})


class QueueForm(forms.ModelForm):
    """The queue's settings, and before they are saved a preview of the next sweep with them:
    shown on "Preview the next sweep" (nothing saved), and required to be seen (a tick) when
    they would make the sweep fail, requeue or delete more tasks than the settings now."""

    confirm_sweep = forms.BooleanField(
        required=False,
        label="Save even so",
        help_text="The next sweep will act on the tasks counted in the preview below.",
    )

    class Meta:
        model = Queue
        # the admin's fieldsets choose what is shown; these are every setting among them
        fields = (
            *("host", "name", "paused", "queue_seconds", "lease_seconds", "max_attempts"),
            *("backoff_seconds", "backoff_factor", "backoff_cap_seconds", "retain_seconds"),
            *("retain_from", "max_retain_seconds", "archive_payloads", "max_item_bytes"),
            *("max_pending", "item_schema", "public_post", "store"),
            *("rate_count", "rate_seconds", "max_processing", "max_per_key"),
        )

    sweep_preview: SettingsPreview | None = None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors or cleaned.get("host") is None:
            return cleaned
        asked = PREVIEW_BUTTON in self.data
        if not asked and not (self.instance.pk and SWEEP_FIELDS & set(self.changed_data)):
            return cleaned  # the sweep's rules read none of what changed: no files to read
        candidate = construct_instance(self, Queue(), exclude=["id"])
        saved = (
            Queue.objects.select_related("host").get(pk=self.instance.pk)
            if self.instance.pk
            else None
        )
        try:
            self.sweep_preview = preview_settings(saved, candidate)
        except StoreError as exc:  # a PostgreSQL queue whose database does not answer
            raise forms.ValidationError(
                "The next sweep could not be previewed, so nothing was saved: %(why)s",
                code="preview_unavailable",
                params={"why": exc.detail},
            ) from exc
        if asked:
            raise forms.ValidationError(
                "Preview only: nothing was saved. The preview is below the settings.",
                code="preview",
            )
        if self.sweep_preview.more and not cleaned.get("confirm_sweep"):
            raise forms.ValidationError(
                "With these settings the next sweep acts on more tasks (see the preview below "
                "the settings). Tick “Save even so” to save them.",
                code="sweep_preview",
            )
        return cleaned


@admin.register(Queue)
class QueueAdmin(QueueFields, admin.ModelAdmin):
    form = QueueForm
    # Short headings and the three switches in one column: beside the admin's side bar and
    # filters, the list must fit a 1400 px screen without scrolling sideways.
    list_display = (
        "__str__",
        "timeout",
        "lease",
        "attempts",
        "most_pending",
        "switches",
        "store",
    )
    list_filter = ("host", "store", "paused", "public_post", "archive_payloads", "retain_from")
    search_fields = ("name", "host__name")
    list_select_related = ("host",)
    inlines = [QueueAccessInline]
    fieldsets = (
        (None, {"fields": ("host", "name", "paused")}),
        (
            "Time limits",
            {
                "description": "A task that waits or runs longer than the queue timeout fails. "
                "A claimed task whose lease lapses goes back to pending for another worker.",
                "fields": ("queue_seconds", "lease_seconds"),
            },
        ),
        (
            "Retries",
            {
                "description": "A worker may ask for a retry when it fails a task (the Python "
                "worker loop does when a handler raises), and a task whose lease lapsed runs "
                "again: both until the attempt budget is spent (3 for a new queue). The delay "
                "before each retry grows by the factor, up to the longest delay.",
                "fields": (
                    "max_attempts",
                    "backoff_seconds",
                    "backoff_factor",
                    "backoff_cap_seconds",
                ),
            },
        ),
        (
            "Retention and history",
            {
                "description": "Done tasks are deleted after the retention; the event log "
                "keeps their history either way.",
                "fields": (
                    "retain_seconds",
                    "retain_from",
                    "max_retain_seconds",
                    "archive_payloads",
                ),
            },
        ),
        (
            "Limits and posting",
            {"fields": ("max_item_bytes", "max_pending", "item_schema", "public_post")},
        ),
        (
            "Flow control",
            {
                "description": "Limits on claims, across every worker and server process: a "
                "rate (claims per seconds), how many tasks run at once, and how many of one "
                "concurrencyKey (a post's option). Tasks held back stay pending and are not "
                "failed by waiting; their queue timeout still applies. 0: no limit.",
                "fields": ("rate_count", "rate_seconds", "max_processing", "max_per_key"),
            },
        ),
        (
            "Store",
            {
                "description": "Files: the tasks live in this machine's directories (one web "
                "server). PostgreSQL: in the database, so several web servers behind a load "
                "balancer share the queue, and the database's backups cover it.",
                "fields": ("store",),
            },
        ),
        (
            "Before saving",
            {
                "description": "Settings that would make the next sweep fail, requeue or "
                "delete more tasks are saved only once you have seen the preview.",
                "fields": ("confirm_sweep",),
            },
        ),
    )

    def get_fieldsets(self, request: HttpRequest, obj: Queue | None = None) -> Any:
        """A queue not yet saved has no tasks for a sweep to act on: no "Save even so"."""
        if obj is None:
            return [fieldset for fieldset in self.fieldsets if fieldset[0] != "Before saving"]
        return self.fieldsets

    timeout = seconds_column("queue_seconds", "timeout")
    lease = seconds_column("lease_seconds", "lease")

    @admin.display(description="attempts", ordering="max_attempts")
    def attempts(self, queue: Queue) -> str:
        return str(queue.max_attempts) if queue.max_attempts else "no budget"

    @admin.display(description="max pending", ordering="max_pending")
    def most_pending(self, queue: Queue) -> str:
        return str(queue.max_pending) if queue.max_pending else "unbounded"

    @admin.display(description="switches")
    def switches(self, queue: Queue) -> str:
        on = [
            ("paused", queue.paused),
            ("public post", queue.public_post),
            ("archives payloads", queue.archive_payloads),
        ]
        return ", ".join(name for name, set_ in on if set_) or "—"


@admin.register(QueueAccess)
class QueueAccessAdmin(admin.ModelAdmin):
    list_display = ("queue", "user", "group", "role", "created_at")
    list_filter = ("role", "queue__host", "queue")
    search_fields = ("user__username", "group__name", "queue__name", "queue__host__name")
    autocomplete_fields = ("user", "group", "queue")
    list_select_related = ("queue__host", "user", "group")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "user",
        "prefix",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    list_filter = ("revoked_at", "expires_at")
    search_fields = ("name", "user__username", "prefix")
    autocomplete_fields = ("user",)
    readonly_fields = ("prefix", "created_at", "last_used_at")
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        if obj is None:
            return ["user", "name", "expires_at"]
        return ["user", "name", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple:
        return ("user", *self.readonly_fields) if obj else ()

    def save_model(self, request: HttpRequest, obj: ApiToken, form: object, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        record, token = issue_token(obj.user, obj.name, expires_at=obj.expires_at)
        obj.pk, obj.prefix = record.pk, record.prefix
        obj.issued_token = token  # for response_add, the token's only showing

    def response_add(
        self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None
    ) -> HttpResponse:
        # The answer to the save itself shows the token, not a redirect and a message: the
        # message would travel in the messages cookie (signed, not encrypted) and sit in the
        # browser until the next page. The admin's views already say Cache-Control: no-store.
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "New API token",
            "record": obj,
            "token": obj.issued_token,
        }
        return TemplateResponse(request, "admin/queues/apitoken/issued.html", context)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        # One save per token, not a bulk update: saves tell the API's memo to forget at once.
        live = list(queryset.filter(revoked_at__isnull=True))
        now = timezone.now()
        for record in live:
            revoke_token(record, now=now)
        self.message_user(request, f"Revoked {len(live)} token(s).")
