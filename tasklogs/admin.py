"""TaskEvent in the admin: read-only (the log is the source), with the Task Logs filters."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from queues.models import Host, Queue
from queues.store.eventlog import EVENTS

from .models import TaskEvent


class _ChoicesFilter(admin.SimpleListFilter):
    """A filter whose choices come from configuration, not from a DISTINCT over the events
    (which on ten million rows would be a full index scan on every admin page)."""

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = self.value()
        return queryset.filter(**{self.parameter_name: value}) if value else queryset


class EventFilter(_ChoicesFilter):
    title, parameter_name = "event", "event"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(e, e) for e in sorted(EVENTS)]


class HostFilter(_ChoicesFilter):
    title, parameter_name = "host", "host"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(h, h) for h in Host.objects.values_list("name", flat=True)]


class QueueFilter(_ChoicesFilter):
    title, parameter_name = "queue", "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(q, q) for q in Queue.objects.values_list("name", flat=True).distinct()]


@admin.register(TaskEvent)
class TaskEventAdmin(admin.ModelAdmin):
    list_display = (
        "at",
        "host",
        "queue",
        "task_id",
        "event",
        "status",
        "attempts",
        "worker",
        "bytes_item",
        "bytes_progress",
        "bytes_result",
        "bytes_error",
        "archived",
    )
    list_filter = (EventFilter, HostFilter, QueueFilter, ("at", admin.DateFieldListFilter))
    # Exact matches only: each uses an index; a LIKE '%…%' over the table would not.
    search_fields = ("=task_id", "=worker")
    search_help_text = "An exact task id or worker name."
    ordering = ("-at", "-id")
    show_full_result_count = False  # no second COUNT(*) over the whole table on every page
    list_per_page = 100

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
