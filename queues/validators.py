"""Django validators for configuration, delegating to the store's own rules, and the admin's
form field for integers (ASCII digits only, as queues.store.numerals).

The store validates every name again before it builds a path; these run first so that an
admin or a command refuses a bad name with a form error instead of a 404 later.
"""

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from queues.store import names, numerals, paths
from queues.store.errors import InvalidName


def validate_name(value: str) -> None:
    """A name a person gives (an API token's, a schedule's): the store's one rule for names
    (queues/store/names.py), which also holds workers' names and concurrency keys."""
    position = names.first_unprintable(value)
    if position is not None:
        raise ValidationError(names.refusal("The name", value, position), code="invalid_name")


def validate_host_name(value: str) -> None:
    try:
        paths.validate_host(value)
    except InvalidName:
        raise ValidationError(
            "%(value)r is not a DNS host name: lower-case letters, digits, '-' and '.', "
            "labels of 1 to 63 characters, at most 253 in all.",
            code="invalid_host",
            params={"value": value},
        ) from None


def validate_queue_name(value: str) -> None:
    try:
        paths.validate_queue(value)
    except InvalidName:
        raise ValidationError(
            "%(value)r is not a queue name: 1 to 64 of lower-case letters, digits, '-' and '_', "
            "starting with a letter or digit.",
            code="invalid_queue",
            params={"value": value},
        ) from None


def validate_item_schema(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise ValidationError("An item schema is a JSON object.", code="invalid_schema")
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        raise ValidationError(
            "Not a valid JSON Schema: %(reason)s",
            code="invalid_schema",
            params={"reason": exc.message},
        ) from None


class IntegerInDigits(forms.IntegerField):
    """An admin form's integer in the digits 0-9: forms.IntegerField reads what it is sent with
    int(), which takes "٣" and "1_000" (and it takes "3.0" too). The spaces around what was
    typed are let go, as every form field does."""

    default_error_messages = {"invalid": "Enter a whole number in the digits 0-9, such as 30."}

    def to_python(self, value: Any) -> int | None:
        if value in self.empty_values:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        found = numerals.integer(str(value).strip(" \t\r\n"))
        if found is None:
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return found


# An admin's formfield_overrides: every integer column (IntegerField and its positive and
# small kinds, by their classes' order) is typed into an IntegerInDigits.
INTEGERS_IN_DIGITS: dict[type[models.Field], dict[str, Any]] = {
    models.IntegerField: {"form_class": IntegerInDigits}
}
