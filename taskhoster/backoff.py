"""The one retry-with-backoff policy of the client, the worker loop and the command line.

The schedule: the first pause is 0.5 s, each further one twice the one before, none longer than
30 s, and each drawn at random from 80% to 100% of that (so workers that lost the server
together do not all come back in the same instant). A `429` or `503` with `Retry-After` waits
what the server asked instead (also at most 30 s). A caller gives up after its number of tries
(the command line 5, a worker's report 6, the client's idempotent calls 3) or, with none, keeps
trying until its stop event is set (the worker's claims).

Retried: a refused connection (nothing was sent), and the server's `429` and `503` (it did
nothing: busy, or its storage could not write) always; a connection reset, closed or timed
out, and any other `5xx` (a proxy's `502`/`504`, a `500`), only for a call that may safely
arrive twice, since the request may have reached the server and been done. Anything else (a
`4xx`: the same request would be refused again) is raised at once.

The first failure of a run is said once, in one place (`retrying_line`), so a wrong port is
not a silent wait: `connection refused; retrying (4 more tries)`.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from .errors import ApiError
from .numerals import retry_after_seconds

FIRST_PAUSE_SECONDS = 0.5
FACTOR = 2.0
MOST_PAUSE_SECONDS = 30.0
JITTER = 0.2  # a pause is drawn from (1 - JITTER) to 1 times its schedule
ALWAYS_RETRIED = frozenset({429, 503})  # the server says it did nothing

T = TypeVar("T")
CONNECTION_ERRORS = (OSError, http.client.HTTPException)


def schedule(tries: int | None = None, most: float = MOST_PAUSE_SECONDS) -> Iterator[float]:
    """The pauses between tries, before jitter: 0.5, 1, 2, 4, ... 30, 30 (tries - 1 of them;
    without end when `tries` is None); none longer than `most`."""
    pause, given = min(FIRST_PAUSE_SECONDS, most), 0
    while tries is None or given < tries - 1:
        yield pause
        pause, given = min(pause * FACTOR, most), given + 1


def retryable(exc: BaseException, *, repeatable: bool) -> bool:
    """Whether another try may do better; `repeatable`: the call may safely arrive twice."""
    if isinstance(exc, ApiError):
        return exc.status in ALWAYS_RETRIED or (repeatable and exc.status >= 500)
    if isinstance(exc, ConnectionRefusedError):
        return True
    return repeatable and isinstance(exc, CONNECTION_ERRORS)


def pause_for(exc: BaseException, planned: float) -> float:
    """The pause before the next try: the server's Retry-After when it gave one, else the
    planned pause, jittered."""
    header = exc.headers.get("retry-after") if isinstance(exc, ApiError) else None
    after = retry_after_seconds(header)  # None for an HTTP date: the schedule's pause instead
    if after is not None:
        return float(min(after, MOST_PAUSE_SECONDS))
    return planned * random.uniform(1 - JITTER, 1)  # noqa: S311 (spacing, not secrecy)


def reason(exc: BaseException) -> str:
    """What went wrong, in a few words: `connection refused`, `503 storage_unavailable`."""
    if isinstance(exc, ApiError):
        return f"{exc.status} {exc.code}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return str(exc) or type(exc).__name__


def retrying_line(exc: BaseException, tries: int | None, pause: float) -> str:
    """The line said at the first failure of a run of tries."""
    if tries is None:
        return f"{reason(exc)}; retrying in {pause:.1f} s, then with a growing pause"
    more = tries - 1
    return f"{reason(exc)}; retrying ({more} more {'try' if more == 1 else 'tries'})"


def with_backoff(
    call: Callable[[], T],
    *,
    tries: int | None,
    repeatable: bool,
    say: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    after_failure: Callable[[], None] | None = None,
    most: float = MOST_PAUSE_SECONDS,
    recovered: Callable[[float], None] | None = None,
) -> T:
    """`call`, tried again by the policy above until it answers; raises its last error when
    the tries are spent, when an error is not retried, or when `stop` is set during a pause.

    `say` gets the retrying line once, at the first failure; `after_failure` runs after each
    failed try (the client drops its broken connection). `most` caps the pauses: a caller that
    must be back soon after the server is (a worker's claims) pays for it in tries. `recovered`
    gets the seconds since the first failure when a try answers after failures."""
    pauses = schedule(tries, most)
    first = True
    failed_at = 0.0
    while True:
        try:
            answer = call()
        except (*CONNECTION_ERRORS, ApiError) as exc:
            if after_failure is not None:
                after_failure()
            if not retryable(exc, repeatable=repeatable):
                raise
            planned = next(pauses, None)
            if planned is None:
                raise
            pause = pause_for(exc, planned)
            if first:
                failed_at = time.monotonic()
                if say is not None:
                    say(retrying_line(exc, tries, pause))
            first = False
            if stop is None:
                threading.Event().wait(pause)
            elif stop.wait(pause):
                raise
        else:
            if not first and recovered is not None:
                recovered(time.monotonic() - failed_at)
            return answer
