"""The event list's filters: GET parameters, so a filtered page is a URL one can share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from queues.models import Queue
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
    """Host and queue are choices among the queues the user operates (all of them for staff);
    a value from elsewhere, say an old shared URL, is explained, not run."""

    host = forms.ChoiceField(
        required=False,
        validators=[_store_rule(validate_host, "host name")],
        error_messages={"invalid_choice": "You operate no queue on the host %(value)s."},
    )
    queue = forms.ChoiceField(
        required=False,
        validators=[_store_rule(validate_queue, "queue name")],
        error_messages={"invalid_choice": "You operate no queue named %(value)s."},
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

    def __init__(self, data: Any, *, operated: Iterable[Queue]) -> None:
        super().__init__(data)
        queues = list(operated)
        hosts = sorted({queue.host.name for queue in queues})
        names = sorted({queue.name for queue in queues})
        self.fields["host"].choices = [("", "any")] + [(h, h) for h in hosts]
        self.fields["queue"].choices = [("", "any")] + [(n, n) for n in names]

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
