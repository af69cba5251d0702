"""A queue's last day as a small inline SVG, drawn on the server: no script, no library.

Posted tasks are bars; finished and failed are lines over them, on one scale. Every piece of
markup goes through format_html or format_html_join, so every value put in it is escaped,
the label (a queue's name) above all. A dashboard of 50 queues draws some 5,000 elements per
refresh, so the half-hour columns' fixed parts (position, clock times) are built once per
day window and shared by every queue's chart.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from queues.console.activity import BUCKET_SECONDS, BUCKETS, Activity, Series

STEP = 4  # px per half hour
WIDTH, HEIGHT = BUCKETS * STEP, 36
TOP = 2  # px kept free above the highest value
AXIS_BAND = 12  # px under the chart for the time axis's labels
TICK_EVERY = 16  # half hours between two labels of the time axis: 8 hours
_NOTHING = format_html("{}", "")  # an empty part of the markup
_CHART = (
    '<svg class="chart{quiet}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {full}" '
    'width="{w}" height="{full}" role="img" aria-label="{summary}"><title>{summary}</title>'
    '<line class="axis" x1="0" y1="{h}" x2="{w}" y2="{h}"></line>{body}{axis}</svg>'
)


def activity_chart(activity: Activity, *, label: str) -> SafeString:
    """The chart of `activity`, named `label` for screen readers and on hover."""
    if activity.quiet:
        summary = f"{label}: no events in the last 24 hours"
        body = format_html('<text x="0" y="{}">no events in 24 hours</text>', HEIGHT - 6)
    else:
        totals = activity.totals()
        scale = max(max(activity.posted), max(activity.finished), max(activity.failed), 1)
        summary = (
            f"{label}, last 24 hours: {totals['posted_day']} posted, "
            f"{totals['finished_day']} finished, {totals['failed_day']} failed; "
            f"at most {scale} in a half hour (the chart's full height)"
        )
        body = format_html(
            '<g class="posted">{}</g>{}{}<g class="slots">{}</g>',
            _bars(activity.posted, scale),
            _line("finished", activity.finished, scale),
            _line("failed", activity.failed, scale),
            _slots(activity),
        )
    return format_html(
        _CHART,
        quiet=" quiet" if activity.quiet else "",
        w=WIDTH,
        h=HEIGHT,
        full=HEIGHT + AXIS_BAND,
        summary=summary,
        body=body,
        axis=_NOTHING if activity.quiet else _time_axis(activity.start),
    )


def _y(value: int, scale: int) -> float:
    return round(HEIGHT - value * (HEIGHT - TOP) / scale, 1)


def _bars(series: Series, scale: int) -> SafeString:
    """The posted bars as one path: one element, not one per half hour."""
    outline = "".join(
        f"M{i * STEP},{HEIGHT}V{_y(n, scale):g}h{STEP - 1}V{HEIGHT}Z"
        for i, n in enumerate(series)
        if n
    )
    return format_html('<path d="{}"></path>', outline) if outline else _NOTHING


def _line(name: str, series: Series, scale: int) -> SafeString:
    if not any(series):
        return _NOTHING
    points = " ".join(f"{i * STEP + STEP / 2:g},{_y(n, scale):g}" for i, n in enumerate(series))
    return format_html('<polyline class="{}" points="{}"></polyline>', name, points)


def _slots(activity: Activity) -> SafeString:
    """An invisible column per half hour whose tooltip gives its numbers."""
    counts = zip(activity.posted, activity.finished, activity.failed, strict=True)
    return format_html_join(
        "",
        "{}{}</title></rect>",
        (
            (opening, f"{posted} posted, {finished} finished, {failed} failed")
            for opening, (posted, finished, failed) in zip(
                _slot_openings(activity.start), counts, strict=True
            )
        ),
    )


@lru_cache(maxsize=8)
def _slot_openings(start: int) -> tuple[SafeString, ...]:
    """Each half-hour column's markup up to its numbers: the same for every queue's chart."""
    return tuple(
        format_html(
            '<rect x="{}" y="0" width="{}" height="{}"><title>{} to {} UTC: ',
            i * STEP,
            STEP,
            HEIGHT,
            _clock(start + i * BUCKET_SECONDS),
            _clock(start + (i + 1) * BUCKET_SECONDS),
        )
        for i in range(BUCKETS)
    )


@lru_cache(maxsize=8)
def _time_axis(start: int) -> SafeString:
    """Clock times (UTC) under the chart every TICK_EVERY half hours, "now" at its right end."""
    ticks = [
        (i * STEP, "start" if i == 0 else "middle", _clock(start + i * BUCKET_SECONDS))
        for i in range(0, BUCKETS, TICK_EVERY)
    ]
    ticks.append((WIDTH, "end", "now"))
    return format_html(
        '<g class="time-axis">{}</g>',
        format_html_join(
            "",
            '<text x="{}" y="{}" text-anchor="{}">{}</text>',
            ((x, HEIGHT + AXIS_BAND - 2, anchor, text) for x, anchor, text in ticks),
        ),
    )


def _clock(t: int) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H:%M")
