"""Child processes of the tests: stopped as a user stops them (Ctrl-C), and never left behind.

A test that fails while its child runs must not leave a sweep loop or a follower going into the
next test: `reaped` kills and reaps what the block left running."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def reaped(child: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """The child for the block; killed (SIGKILL) and reaped after it if it still runs."""
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


def interrupted(child: subprocess.Popen[Any], *, timeout: float = 30) -> tuple[Any, Any]:
    """Ctrl-C (SIGINT) to the child, then its standard output and error once it stopped."""
    child.send_signal(signal.SIGINT)
    return child.communicate(timeout=timeout)
