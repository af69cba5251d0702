"""The clock at the store's edge: every verb takes `now`, and only here does None mean 'real'."""

import time


def now_ms(now: int | None) -> int:
    """Time is a parameter; only at this edge does None mean the real clock (ms since epoch)."""
    return int(time.time() * 1000) if now is None else now
