"""The queue page's flow control panel: the queue's limits in words, how many tasks are in
processing against its cap, the rate limit's bucket fill, the keys at their cap, and how many
claimable pending tasks the queue's limits hold back now."""

from __future__ import annotations

from dataclasses import dataclass

from queues import stores
from queues.models import Queue
from queues.store import NotFound, StateCounts, StoreError
from queues.store.limits import FlowState
from queues.store.settings import QueueSettings
from queues.text.durations import readable_seconds


@dataclass(frozen=True, kw_only=True)
class FlowPanel:
    rows: list[tuple[str, str]]  # (label, value), as the settings glance
    held: str  # what is held back now, in words ("" for nothing)


def flow_settings(queue: Queue) -> list[tuple[str, str]]:
    """The queue's flow limits in words, for the settings glance."""
    rate = (
        f"{queue.rate_count:,} claims per {readable_seconds(queue.rate_seconds)}"
        if queue.rate_count
        else "no limit"
    )
    return [
        ("claim rate", rate),
        ("processing at most", f"{queue.max_processing:,}" if queue.max_processing else "no limit"),
        ("per key at most", f"{queue.max_per_key:,}" if queue.max_per_key else "no limit"),
    ]


def flow_panel(queue: Queue, counts: StateCounts | None, *, now_ms: int) -> FlowPanel | None:
    """None for a queue without limits, or one the store has nothing of yet."""
    settings = queue.to_settings()
    if not settings.limited or counts is None:
        return None
    try:
        state = stores.of(queue.host.name, queue.name).flow_state(
            queue.host.name, queue.name, settings=settings, now=now_ms
        )
    except NotFound:
        return None
    except StoreError as exc:  # a PostgreSQL queue whose database does not answer
        return FlowPanel(rows=[], held=f"unknown: {exc.detail}")
    return FlowPanel(
        rows=_rows(settings.max_processing, state), held=_held(settings, state, counts)
    )


def _rows(max_processing: int, state: FlowState) -> list[tuple[str, str]]:
    rows = []
    if max_processing:
        rows.append(("processing", f"{state.processing:,} of {max_processing:,}"))
    if state.tokens is not None:
        rows.append(("bucket", f"{state.tokens:.1f} of {state.capacity} tokens"))
    if state.key_counts:
        busiest = sorted(state.key_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        rows.append(("keys in processing", ", ".join(f"{k} ({n})" for k, n in busiest)))
    return rows


def _held(settings: QueueSettings, state: FlowState, counts: StateCounts) -> str:
    claimable = counts.pending - counts.delayed - counts.retrying
    if claimable <= 0:
        return ""
    if settings.max_processing and state.processing >= settings.max_processing:
        return f"{claimable:,} claimable held back by maxProcessing"
    if state.tokens is not None and state.tokens < 1:
        return f"{claimable:,} claimable held back by the rate limit"
    most = settings.max_per_key
    full = sorted(k for k, n in state.key_counts.items() if most and n >= most)
    if full:
        return f"tasks of {len(full)} key(s) at their cap are held back: {', '.join(full[:5])}"
    return ""
