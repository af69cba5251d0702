"""A progress bar of our own for long backfills: one line on a terminal, nothing elsewhere."""

from __future__ import annotations

import time
from typing import TextIO

WIDTH = 30
EVERY_SECONDS = 0.2  # redraw at most this often: a terminal write per chunk would be noise


class ProgressBar:
    """Redraws `[#####.....]  45%  12.3/27.0 MB` in place; `done()` ends the line."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.stream = max(total, 1), stream
        self.seen = 0
        self.last = 0.0

    def __call__(self, step: int) -> None:
        self.seen += step
        now = time.monotonic()
        if now - self.last >= EVERY_SECONDS or self.seen >= self.total:
            self.last = now
            self._draw()

    def _draw(self) -> None:
        share = min(self.seen / self.total, 1.0)
        filled = int(share * WIDTH)
        bar = "#" * filled + "." * (WIDTH - filled)
        mb = f"{self.seen / 1e6:.1f}/{self.total / 1e6:.1f} MB"
        self.stream.write(f"\r[{bar}] {share:4.0%}  {mb}")
        self.stream.flush()

    def done(self) -> None:
        self._draw()
        self.stream.write("\n")
        self.stream.flush()
