"""One inotify watcher per process that wakes every event stream when a day-file grows.

The store's watcher (queues/store/waiting.py) watches renames in the queue directories; an
append to the log is an IN_MODIFY it does not ask for, and adding it there would wake every
waiting claim on every log line. So the monitor keeps its own instance (the kernel allows
128 per user; a gunicorn worker then holds two). Without inotify, readers poll.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

IN_MODIFY, IN_MOVED_TO, IN_CREATE, IN_ONLYDIR = 0x2, 0x80, 0x100, 0x01000000
_MASK = IN_MODIFY | IN_MOVED_TO | IN_CREATE | IN_ONLYDIR
POLL_SECONDS = 0.1  # only without inotify


class LogWatcher:
    """`generation` grows on every change in a watched directory; `wait` sleeps until it does."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.generation = 0
        self.cond = threading.Condition()
        self._watched: set[str] = set()
        self._libc = ctypes.CDLL(None, use_errno=True)
        init = getattr(self._libc, "inotify_init1", None)
        self.fd = int(init(os.O_CLOEXEC)) if init is not None else -1
        self.available = self.fd >= 0
        if self.available:
            threading.Thread(target=self._run, name="taskhoster-logwatch", daemon=True).start()

    def watch(self, directory: Path) -> None:
        """Watch a directory's files for appends and new files (idempotent)."""
        key = str(directory)
        with self.cond:
            if not self.available or key in self._watched:
                return
            if int(self._libc.inotify_add_watch(self.fd, os.fsencode(key), _MASK)) < 0:
                return  # readers still wake on their keep-alive tick; nothing is lost, only late
            self._watched.add(key)

    def wait(self, generation: int, timeout: float) -> None:
        """Block until something changed after `generation` was read, or `timeout` passed."""
        with self.cond:
            if self.available:
                self.cond.wait_for(lambda: self.generation != generation, timeout)
            else:
                self.cond.wait(min(timeout, POLL_SECONDS))

    def _run(self) -> None:
        while True:
            os.read(self.fd, 1 << 16)  # which file changed does not matter: readers re-read
            with self.cond:
                self.generation += 1
                self.cond.notify_all()


_watcher: LogWatcher | None = None
_lock = threading.Lock()


def log_watcher() -> LogWatcher:
    """This process's watcher (a forked gunicorn worker makes its own: threads do not fork)."""
    global _watcher
    with _lock:
        if _watcher is None or _watcher.pid != os.getpid():
            _watcher = LogWatcher()
        return _watcher
