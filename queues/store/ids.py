"""New task ids: 16 hex digits of the system's random source, drawn many ids at a time."""

from __future__ import annotations

import os
import threading

_ID_BYTES = 8
_DRAWN = 128  # ids per getrandom() call: each post drew its own before, one system call each
_lock = threading.Lock()
_pool = b""


def new_task_id() -> str:
    """An id no other post picks: the kernel's CSPRNG (os.urandom, as secrets.token_hex
    draws), read ahead in one call for the next ids of this process only."""
    global _pool
    with _lock:
        if not _pool:
            _pool = os.urandom(_ID_BYTES * _DRAWN)
        drawn, _pool = _pool[:_ID_BYTES], _pool[_ID_BYTES:]
    return drawn.hex()


def _forget_pool_in_child() -> None:
    """A forked child must never hand out the ids its parent drew and will hand out too."""
    global _pool, _lock
    _pool, _lock = b"", threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)
