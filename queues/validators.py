"""Django validators for configuration, delegating to the store's own rules.

The store validates every name again before it builds a path; these run first so that an
admin or a command refuses a bad name with a form error instead of a 404 later.
"""

from typing import Any

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from queues.store import names, paths
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
