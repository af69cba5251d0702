"""Signing a notification so its receiver can tell it came from taskhoster, unchanged and fresh.

The signature is HMAC-SHA256, keyed with the queue's webhook secret, over the timestamp, a dot
and the exact body bytes. Signing the timestamp too (not the body alone) is what lets a receiver
refuse a captured request replayed later: it checks the signature, then that the timestamp is
recent (README, "Failure notifications", shows a receiver doing both).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SIGNATURE_HEADER = "Taskhoster-Signature"
TIMESTAMP_HEADER = "Taskhoster-Timestamp"
SCHEME = "sha256="


def new_secret() -> str:
    return secrets.token_hex(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The header's value: `sha256=` and the hex digest of `<timestamp>.<body>`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return SCHEME + mac.hexdigest()
