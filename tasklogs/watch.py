"""Waking `ingest_tasklogs --follow` when a day-file grows or a new one appears.

The store's watcher (`queues.store.waiting`) listens for entries created, moved and deleted in
state directories; an append to a day-file is a modification, which it does not ask the kernel
for. So this is a watch of our own on the log directory, with IN_MODIFY, through ctypes.
Without inotify (another OS, or the per-user instance limit reached) it polls cheaply.
"""

from __future__ import annotations

import ctypes
import os
import select
from pathlib import Path

IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100
_MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
POLL_SECONDS = 1.0  # the fallback: a few stat calls a second cost nothing


class DirectoryWatch:
    """`wait(timeout)` returns when something in the directory changed, or after the timeout."""

    def __init__(self, directory: Path) -> None:
        self.fd = -1
        libc = ctypes.CDLL(None, use_errno=True)
        if hasattr(libc, "inotify_init1"):
            fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
            if fd >= 0 and libc.inotify_add_watch(fd, os.fsencode(directory), _MASK) >= 0:
                self.fd = fd
            elif fd >= 0:
                os.close(fd)

    @property
    def uses_inotify(self) -> bool:
        return self.fd >= 0

    def wait(self, timeout: float) -> None:
        if self.fd < 0:
            select.select([], [], [], min(timeout, POLL_SECONDS))
            return
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            self._drain()

    def _drain(self) -> None:
        # The events themselves do not matter: any change means "read the directory again".
        try:
            while os.read(self.fd, 1 << 16):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
