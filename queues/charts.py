"""A queue's last day as a small inline SVG, drawn on the server: no script, no library.

Posted tasks are bars; finished and failed are lines over them, on one scale. Every text that
goes into the markup (the queue's name, the tooltips) is escaped by format_html.
"""

from __future__ import annotations

import datetime as dt

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from queues.activity import BUCKET_SECONDS, BUCKETS, Activity, Series

STEP = 4  # px per half hour
WIDTH, HEIGHT = BUCKETS * STEP, 36
TOP = 2  # px kept free above the highest value


def activity_chart(activity: Activity, *, label: str) -> SafeString:
    """The chart of `activity`, named `label` for screen readers and on hover."""
    totals = activity.totals()
    summary = (
        f"{label}, last 24 hours: {totals['posted_day']} posted, "
        f"{totals['finished_day']} finished, {totals['failed_day']} failed"
    )
    if activity.quiet:
        return format_html(
            '<svg class="chart quiet" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" '
            'width="{w}" height="{h}" role="img" aria-label="{summary}"><title>{summary}</title>'
            '<line class="axis" x1="0" y1="{h}" x2="{w}" y2="{h}"></line>'
            '<text x="0" y="{y}">no events in 24 hours</text></svg>',
            w=WIDTH,
            h=HEIGHT,
            y=HEIGHT - 6,
            summary=f"{label}: no events in the last 24 hours",
        )
    scale = max(max(activity.posted), max(activity.finished), max(activity.failed), 1)
    return format_html(
        '<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" '
        'width="{w}" height="{h}" role="img" aria-label="{summary}"><title>{summary}</title>'
        '<line class="axis" x1="0" y1="{h}" x2="{w}" y2="{h}"></line>'
        '<g class="posted">{bars}</g>{finished}{failed}<g class="slots">{slots}</g></svg>',
        w=WIDTH,
        h=HEIGHT,
        summary=summary,
        bars=_bars(activity.posted, scale),
        finished=_line("finished", activity.finished, scale),
        failed=_line("failed", activity.failed, scale),
        slots=_slots(activity),
    )


def _y(value: int, scale: int) -> float:
    return round(HEIGHT - value * (HEIGHT - TOP) / scale, 1)


def _bars(series: Series, scale: int) -> SafeString:
    return format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}"></rect>',
        (
            (i * STEP, _y(n, scale), STEP - 1, round(HEIGHT - _y(n, scale), 1))
            for i, n in enumerate(series)
            if n
        ),
    )


def _line(name: str, series: Series, scale: int) -> SafeString:
    if not any(series):
        return SafeString("")
    points = " ".join(f"{i * STEP + STEP / 2:g},{_y(n, scale):g}" for i, n in enumerate(series))
    return format_html('<polyline class="{}" points="{}"></polyline>', name, points)


def _slots(activity: Activity) -> SafeString:
    """An invisible column per half hour whose tooltip gives its numbers."""
    start = activity.end - BUCKETS * BUCKET_SECONDS
    return format_html_join(
        "",
        '<rect x="{}" y="0" width="{}" height="{}"><title>{} to {} UTC: {} posted, {} finished, '
        "{} failed</title></rect>",
        (
            (
                i * STEP,
                STEP,
                HEIGHT,
                _clock(start + i * BUCKET_SECONDS),
                _clock(start + (i + 1) * BUCKET_SECONDS),
                activity.posted[i],
                activity.finished[i],
                activity.failed[i],
            )
            for i in range(BUCKETS)
        ),
    )


def _clock(t: int) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H:%M")
