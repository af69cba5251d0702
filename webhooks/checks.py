"""The webhook time limits must be positive numbers of seconds: a deadline of 0 would fail
every call at once and spend each notification's five tries within a few passes."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.checks import Error


def check_time_limits(**kwargs: Any) -> list[Error]:
    errors = []
    for code, name in ((1, "TASKHOSTER_WEBHOOK_DEADLINE_SECONDS"),
                       (2, "TASKHOSTER_WEBHOOK_PASS_SECONDS")):  # fmt: skip
        value = getattr(settings, name)
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            errors.append(
                Error(
                    f"{name} is {value!r}; it must be a number of seconds above 0.",
                    hint="Unset it for the default (10 s for a call, 20 s for a pass).",
                    id=f"webhooks.E00{code}",
                )
            )
    return errors
