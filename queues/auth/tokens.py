"""API tokens: issue one (shown once), and find the token a bearer header names.

A token reads `th_<prefix>_<secret>`. The prefix is stored in clear to find the row; the
whole token only as a SHA-256 hash, so a dump of the database yields no usable token. A
slow password hash would add nothing: the secret is 256 random bits, not a human password.
"""

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from queues.models import ApiToken
from queues.validators import validate_name

TOKEN_PATTERN = re.compile(r"th_([0-9a-f]{8})_[A-Za-z0-9_-]{43}")
# Writing last_used_at on every request would turn each API read into a database write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def issue_token(
    user: AbstractBaseUser, name: str, *, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token for `user`; the clear token is returned here and never again.
    ValidationError for a name the one rule for names refuses (validators.validate_name)."""
    validate_name(name)
    while True:
        prefix = secrets.token_hex(4)
        if not ApiToken.objects.filter(prefix=prefix).exists():
            break
    token = f"th_{prefix}_{secrets.token_urlsafe(32)}"
    record = ApiToken.objects.create(
        user=user, name=name, prefix=prefix, token_hash=hash_token(token), expires_at=expires_at
    )
    return record, token


def find_token(token: str, *, now: datetime | None = None) -> ApiToken | None:
    """The usable token row for a presented token, or None (unknown, revoked or expired)."""
    match = TOKEN_PATTERN.fullmatch(token)
    if match is None:
        return None
    record = ApiToken.objects.select_related("user").filter(prefix=match.group(1)).first()
    # Compare in constant time even when the prefix is unknown, so timing tells nothing.
    expected = record.token_hash if record else "0" * 64
    if not hmac.compare_digest(expected, hash_token(token)) or record is None:
        return None
    now = now or timezone.now()
    if not record.is_usable(now) or not record.user.is_active:
        return None
    if record.last_used_at is None or now - record.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=record.pk).update(last_used_at=now)
        record.last_used_at = now
    return record


def revoke_token(record: ApiToken, *, now: datetime | None = None) -> None:
    if record.revoked_at is None:
        record.revoked_at = now or timezone.now()
        record.save(update_fields=["revoked_at"])
