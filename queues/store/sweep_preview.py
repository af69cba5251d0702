"""What the next sweep would do to one queue with given settings, changing nothing.

The admin shows it before a queue's settings are saved: how many tasks a shorter queue timeout
would fail at once, a shorter retention delete, and so on. The rules are the sweep's own
(sweep.verdict), applied to every task as it is on disk now; the sweep's repairs (copies, temp
files, corrupt files) are not rules of the settings and are left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import copies, paths
from .clock import now_ms
from .core import QueueCore
from .errors import NotFound
from .rules import verdict
from .settings import QueueSettings

KINDS = ("timeout", "requeue", "failed", "cancelled", "cleaned")
SAMPLE = 5  # ids shown of each kind


@dataclass(frozen=True)
class SweepPreview:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    samples: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def preview_queue(
    core: QueueCore, host: str, queue: str, settings: QueueSettings, *, now: int | None = None
) -> SweepPreview:
    """Each task the sweep's rules would act on with `settings` at `now`, counted by what they
    would do (a few ids of each, smallest first). A queue never posted to: nothing."""
    now = now_ms(now)
    preview = SweepPreview()
    try:
        with core.queue_dirs(host, queue) as qd:
            with core.lock:
                posted = {i: entry[1] for i, entry in core.index(qd).entries.items()}
            for directory in paths.STATE_DIRS:
                for task_id in sorted(_ids(qd.fd(directory))):
                    if directory == "pending" and _fresh(posted.get(task_id), settings, now):
                        continue  # the sweep's own shortcut: no rule applies to it
                    _judge(qd, directory, task_id, settings, now, preview)
    except NotFound:
        pass
    return preview


def _ids(fd: int) -> set[str]:
    return {i for e in os.scandir(fd) if (i := paths.task_id_of(e.name))}


def _fresh(posted_at: int | None, settings: QueueSettings, now: int) -> bool:
    """Younger than the queue timeout by its postedAt, so by its window too (the window
    starts there or later)."""
    return posted_at is not None and now - posted_at <= settings.queue_seconds * 1000


def _judge(
    qd: paths.QueueDirs,
    directory: str,
    task_id: str,
    settings: QueueSettings,
    now: int,
    preview: SweepPreview,
) -> None:
    try:
        found = copies.winner(qd, task_id)
    except NotFound:
        return  # gone since the listing, or only corrupt copies (the sweep quarantines those)
    if found.directory != directory:
        return  # counted once, in the directory of the copy that wins
    kind = verdict(found.directory, found.task, settings, now)
    if kind is not None:
        preview.counts[kind] += 1
        if len(preview.samples[kind]) < SAMPLE:
            preview.samples[kind].append(task_id)
