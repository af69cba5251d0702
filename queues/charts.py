"""A queue's last day as a small inline SVG, drawn on the server: no script, no library.

Posted tasks are bars; finished and failed are lines over them, on one scale. The only text
that comes from outside is the label (a queue's name), escaped by format_html; the rest is
numbers and clock times this module writes. The markup is built as plain strings, not through
format_html per element: a dashboard of 50 queues draws some 5,000 elements per refresh.
"""

from __future__ import annotations

import datetime as dt

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from queues.activity import BUCKET_SECONDS, BUCKETS, Activity, Series

STEP = 4  # px per half hour
WIDTH, HEIGHT = BUCKETS * STEP, 36
TOP = 2  # px kept free above the highest value
_CHART = (
    '<svg class="chart{quiet}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" '
    'width="{w}" height="{h}" role="img" aria-label="{summary}"><title>{summary}</title>'
    '<line class="axis" x1="0" y1="{h}" x2="{w}" y2="{h}"></line>{body}</svg>'
)


def activity_chart(activity: Activity, *, label: str) -> SafeString:
    """The chart of `activity`, named `label` for screen readers and on hover."""
    if activity.quiet:
        summary = f"{label}: no events in the last 24 hours"
        body = f'<text x="0" y="{HEIGHT - 6}">no events in 24 hours</text>'
    else:
        totals = activity.totals()
        summary = (
            f"{label}, last 24 hours: {totals['posted_day']} posted, "
            f"{totals['finished_day']} finished, {totals['failed_day']} failed"
        )
        scale = max(max(activity.posted), max(activity.finished), max(activity.failed), 1)
        body = (
            f'<g class="posted">{_bars(activity.posted, scale)}</g>'
            + _line("finished", activity.finished, scale)
            + _line("failed", activity.failed, scale)
            + f'<g class="slots">{_slots(activity)}</g>'
        )
    # format_html escapes the summary, the one text from outside; the body is numbers and
    # clock times written here.
    return format_html(
        _CHART,
        quiet=" quiet" if activity.quiet else "",
        w=WIDTH,
        h=HEIGHT,
        summary=summary,
        body=mark_safe(body),  # noqa: S308
    )


def _y(value: int, scale: int) -> float:
    return round(HEIGHT - value * (HEIGHT - TOP) / scale, 1)


def _bars(series: Series, scale: int) -> str:
    return "".join(
        f'<rect x="{i * STEP}" y="{_y(n, scale):g}" width="{STEP - 1}" '
        f'height="{HEIGHT - _y(n, scale):g}"></rect>'
        for i, n in enumerate(series)
        if n
    )


def _line(name: str, series: Series, scale: int) -> str:
    if not any(series):
        return ""
    points = " ".join(f"{i * STEP + STEP / 2:g},{_y(n, scale):g}" for i, n in enumerate(series))
    return f'<polyline class="{name}" points="{points}"></polyline>'


def _slots(activity: Activity) -> str:
    """An invisible column per half hour whose tooltip gives its numbers."""
    start = activity.start
    return "".join(
        f'<rect x="{i * STEP}" y="0" width="{STEP}" height="{HEIGHT}"><title>'
        f"{_clock(start + i * BUCKET_SECONDS)} to {_clock(start + (i + 1) * BUCKET_SECONDS)} "
        f"UTC: {activity.posted[i]} posted, {activity.finished[i]} finished, "
        f"{activity.failed[i]} failed</title></rect>"
        for i in range(BUCKETS)
    )


def _clock(t: int) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H:%M")
