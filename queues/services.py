"""The functions the commands, the admin and the API share for configuration: saving a queue,
finding one, granting a role, the settings the sweep gives each queue (the stores are opened in
queues/stores/)."""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from queues.models import Host, Queue, QueueAccess, Role
from queues.store.settings import QueueSettings


def queue_settings_for(host: str, queue: str) -> QueueSettings | None:
    """The store settings of a configured queue, or None for a queue the console does not know."""
    found = Queue.objects.select_related("host").filter(host__name=host, name=queue).first()
    return found.to_settings() if found else None


@transaction.atomic
def save_queue(host_name: str, queue_name: str, **fields: Any) -> tuple[Queue, bool]:
    """Create the host if needed and the queue, or update the queue's settings.

    Validation is the models' own (`full_clean`), so the admin and the command agree.
    Raises ValidationError and writes nothing when any field is refused.
    """
    host = Host.objects.filter(name=host_name).first()
    if host is None:
        host = Host(name=host_name)
        host.full_clean()
        host.save()
    queue = Queue.objects.filter(host=host, name=queue_name).first()
    created = queue is None
    if queue is None:
        queue = Queue(host=host, name=queue_name)
    for field, value in fields.items():
        setattr(queue, field, value)
    queue.full_clean()
    queue.save()
    return queue, created


def describe(exc: ValidationError) -> str:
    """A validation error on one line, each field's messages after its name: for commands."""
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)


def find_queue(path: str) -> Queue:
    """The queue named `HOST/QUEUE`; ValidationError when the form or the queue is unknown."""
    host_name, sep, queue_name = path.partition("/")
    if not sep or not host_name or not queue_name:
        raise ValidationError(f"{path!r} is not HOST/QUEUE.")
    queue = (
        Queue.objects.select_related("host").filter(host__name=host_name, name=queue_name).first()
    )
    if queue is None:
        raise ValidationError(f"There is no queue {path!r}.")
    return queue


def grant(username: str, queue_path: str, role: str) -> tuple[QueueAccess, bool]:
    """Give a user (created, without a password, when missing) a role on a queue."""
    if role not in Role.values:
        raise ValidationError(f"Unknown role {role!r}: choose one of {', '.join(Role.values)}.")
    queue = find_queue(queue_path)
    user = get_or_create_user(username)
    return QueueAccess.objects.get_or_create(queue=queue, user=user, role=role)


def get_or_create_user(username: str) -> AbstractBaseUser:
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first()
    if user is None:
        user = user_model(username=username)
        user.set_unusable_password()
        user.full_clean()
        user.save()
    return user
