"""The event list's filters: GET parameters, so a filtered page is a URL one can share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from queues.store.errors import StoreError
from queues.store.eventlog import EVENTS
from queues.store.paths import validate_host, validate_queue, validate_task_id

from .queries import Filters, decode_cursor


def _store_rule(check: Callable[[str], str], what: str) -> Callable[[str], None]:
    def validate(value: str) -> None:
        try:
            check(value)
        except StoreError:
            raise ValidationError(f"Not a valid {what}.") from None

    return validate


def _cursor(value: str) -> None:
    if decode_cursor(value) is None:
        raise ValidationError("Not a page of this list.")


_WHEN = forms.DateTimeInput(attrs={"type": "datetime-local"})


class EventFilterForm(forms.Form):
    host = forms.CharField(
        required=False, max_length=253, validators=[_store_rule(validate_host, "host name")]
    )
    queue = forms.CharField(
        required=False, max_length=64, validators=[_store_rule(validate_queue, "queue name")]
    )
    task = forms.CharField(
        label="task id",
        required=False,
        max_length=16,
        validators=[_store_rule(validate_task_id, "task id")],
    )
    event = forms.ChoiceField(
        required=False, choices=[("", "any")] + [(e, e) for e in sorted(EVENTS)]
    )
    worker = forms.CharField(required=False, max_length=255)
    since = forms.DateTimeField(label="from (UTC)", required=False, widget=_WHEN)
    until = forms.DateTimeField(label="until (UTC)", required=False, widget=_WHEN)
    before = forms.CharField(required=False, widget=forms.HiddenInput, validators=[_cursor])
    after = forms.CharField(required=False, widget=forms.HiddenInput, validators=[_cursor])

    def query(self) -> dict[str, Any]:
        """The arguments of `queries.event_page`, once the form is valid."""
        d = self.cleaned_data
        return {"filters": self.filters(), "before": d["before"], "after": d["after"]}

    def shareable(self) -> str:
        """This page's filters as a query string, without its place in the list."""
        params = self.data.copy()
        for name in ("before", "after"):
            params.pop(name, None)
        return params.urlencode()

    def filters(self) -> Filters:
        d = self.cleaned_data
        return Filters(
            host=d["host"],
            queue=d["queue"],
            task_id=d["task"],
            event=d["event"],
            worker=d["worker"],
            since=d["since"],
            until=d["until"],
        )
