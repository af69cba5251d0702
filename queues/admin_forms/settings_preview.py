"""Before a queue's settings are saved: what the next sweep would do with them, beside what it
would do with the settings as they are. The admin's queue form shows it and asks for a tick
before saving settings that would make the sweep fail or delete more tasks at once."""

from __future__ import annotations

import time
from dataclasses import dataclass

from queues import stores
from queues.models import Queue
from queues.store import SweepPreview
from queues.store.sweep_preview import KINDS

# What the sweep does with each kind, in the admin's words.
LABELS = {
    "timeout": "fail with a timeout",
    "requeue": "requeue (lease lapsed)",
    "failed": "fail (lease lapsed, attempts spent)",
    "cancelled": "cancel (lease lapsed, cancel requested)",
    "cleaned": "delete (retention over)",
}


@dataclass(frozen=True, kw_only=True)
class PreviewRow:
    kind: str
    label: str
    now: int  # with the saved settings
    then: int  # with the settings in the form
    samples: list[str]  # a few of the ids, with the settings in the form

    @property
    def more(self) -> bool:
        return self.then > self.now


@dataclass(frozen=True, kw_only=True)
class SettingsPreview:
    rows: list[PreviewRow]

    @property
    def more(self) -> bool:
        """The new settings make the next sweep act on more tasks of some kind."""
        return any(row.more for row in self.rows)


def preview_settings(
    saved: Queue | None, candidate: Queue, *, now_ms: int | None = None
) -> SettingsPreview:
    """The next sweep's work with `candidate`'s settings and with `saved`'s (None: a new
    queue, which has no tasks). Reads the queue's tasks in its store; changes nothing."""
    now_ms = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    host, name = candidate.host.name, candidate.name
    then = stores.of(host, name).preview_sweep(host, name, candidate.to_settings(), now=now_ms)
    before = (
        stores.of(saved.host.name, saved.name).preview_sweep(
            saved.host.name, saved.name, saved.to_settings(), now=now_ms
        )
        if saved is not None
        else SweepPreview()
    )
    return SettingsPreview(rows=[_row(kind, before, then) for kind in KINDS])


def _row(kind: str, before: SweepPreview, then: SweepPreview) -> PreviewRow:
    return PreviewRow(
        kind=kind,
        label=LABELS[kind],
        now=before.counts[kind],
        then=then.counts[kind],
        samples=then.samples[kind],
    )
