"""The admin for schedules: the model validates, a service counts runs from a change of timing."""

from __future__ import annotations

import datetime as dt

from django.contrib import admin
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone

from queues.validators import INTEGERS_IN_DIGITS

from . import cron
from .models import CATCH_UP_HELP, Schedule
from .services import restart_count_if_retimed


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    formfield_overrides = INTEGERS_IN_DIGITS
    list_display = ("name", "queue", "cron", "timezone", "enabled", "next_run", "last_run_at")
    list_filter = ("enabled", "queue__host", "queue")
    search_fields = ("name", "queue__name", "queue__host__name")
    list_select_related = ("queue__host",)
    autocomplete_fields = ("queue",)
    readonly_fields = ("next_run", "last_run_at", "last_task_id", "last_error", "active_since")
    fieldsets = (
        (None, {"fields": ("queue", "name", "enabled")}),
        (
            "When",
            {
                "description": CATCH_UP_HELP,
                "fields": ("cron", "timezone", "next_run"),
            },
        ),
        ("What", {"fields": ("item", "priority")}),
        (
            "Last run",
            {"fields": ("last_run_at", "last_task_id", "last_error", "active_since")},
        ),
    )

    @admin.display(description="next run (UTC)")
    def next_run(self, schedule: Schedule) -> dt.datetime | str:
        if schedule.pk is None:
            return "-"
        if not schedule.enabled:
            return "disabled"
        try:
            return schedule.next_run()
        except cron.InvalidSchedule as exc:
            return str(exc)

    def save_model(
        self, request: HttpRequest, obj: Schedule, form: ModelForm, change: bool
    ) -> None:
        restart_count_if_retimed(obj, form.changed_data, now=timezone.now())
        super().save_model(request, obj, form, change)
