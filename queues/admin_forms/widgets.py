"""Form pieces of the admin's queue forms: seconds with their words, a schema that may be blank."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.html import format_html
from django.utils.safestring import SafeString

from queues.text.durations import readable_seconds

SECONDS_FIELDS = frozenset(
    {
        "queue_seconds",
        "lease_seconds",
        "retain_seconds",
        "max_retain_seconds",
        "backoff_seconds",
        "backoff_cap_seconds",
    }
)


class SecondsInput(forms.NumberInput):
    """A number of seconds with the same duration in words beside it; seconds.js keeps the
    words in step while the admin types."""

    class Media:
        js = ["console/words.js", "console/seconds.js"]

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: Any = None,
    ) -> SafeString:
        attrs = {**(attrs or {}), "data-seconds-words": f"{name}-words"}
        field = super().render(name, value, attrs, renderer)
        try:
            words = readable_seconds(int(value))
        except (TypeError, ValueError):
            words = ""  # empty or not a number yet: the field's own error says why
        return format_html(
            '{} <span class="seconds-words" id="{}" aria-live="polite">{}</span>',
            field,
            f"{name}-words",
            words,
        )


class BlankableJSONField(forms.JSONField):
    """JSON that may be absent: a null value shows as an empty box, not the word `null`, and
    an empty box saves null (forms.JSONField already reads it so)."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)
