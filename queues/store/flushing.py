"""Group commit: concurrent operations of one process share each flush of a file system.

An operation that needs what it wrote made durable calls `GroupFlush.wait()`. The first caller
while no flush runs starts one at once (a lone operation waits for one flush, never two); a caller
that arrives while a flush runs cannot be covered by it (its writes may have come after the flush
began), so it joins the next round, which whichever of its waiters sees the running flush end
starts, taking everything that queued meanwhile. Nobody returns before the round that covers it
has returned, and a round that fails fails every one of its waiters with StorageUnavailable.

`FLUSH_OBSERVERS`: callables the store calls with each round's seconds (queues.metrics may add
one); an observer must be quick and must not raise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .errors import StorageUnavailable

FLUSH_OBSERVERS: list[Callable[[float], None]] = []


class _Round:
    """One flush and the operations it covers."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: BaseException | None = None


class GroupFlush:
    """The shared flushes of one file system; `flush` makes everything written before it
    started durable (syncfs) and raises on failure."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._next = _Round()  # the round that starts after the running one (if any) ends
        self._running = False
        self.rounds = 0  # flushes made, for tests and benches that count them

    def wait(self) -> None:
        """Return once a flush that began after this call has made its writes durable."""
        with self._lock:
            mine = self._next
            while not mine.done:
                if self._running:
                    self._changed.wait()
                    continue
                # nothing runs and `mine` has not run: it is still the next round; lead it
                self._running, self._next = True, _Round()
                self._lock.release()
                try:
                    error = self._run()
                finally:
                    self._lock.acquire()
                    mine.error, mine.done, self._running = error, True, False
                    self.rounds += 1
                    self._changed.notify_all()
        if mine.error is not None:
            raise _unavailable(mine.error) from mine.error

    def _run(self) -> BaseException | None:
        started = time.monotonic()
        try:
            self._flush()
        except BaseException as exc:  # every waiter of the round gets it, the leader too
            return exc
        finally:
            took = time.monotonic() - started
            for observe in FLUSH_OBSERVERS:
                observe(took)
        return None


def _unavailable(exc: BaseException) -> StorageUnavailable:
    """A fresh error for each waiter (one exception object raised in many threads at once
    would share one traceback)."""
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StorageUnavailable(f"The store could not flush its writes: {why}.")
