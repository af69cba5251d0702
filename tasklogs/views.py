"""Task Logs pages for operators: parse the request, make one call, render.

Who may see what is decided in `queries` (from `queues.auth.access`); a user who may not see a
queue gets the same 404 as for a queue or task that does not exist.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_safe

from queues.auth.access import operated_queues

from . import queries
from .failure_lines import failure_key, failure_lines
from .forms import EventFilterForm
from .payload_pages import readable
from .payloads import open_payload
from .timeline_rows import timeline_rows

# The payload is user JSON: never let a browser sniff it into HTML, run it, or frame it.
PAYLOAD_POLICY = "default-src 'none'; sandbox"


@require_safe
@login_required
def event_list(request: HttpRequest) -> HttpResponse:
    if not queries.operates_any(request.user):
        raise Http404
    form = EventFilterForm(
        request.GET, operated=operated_queues(request.user).select_related("host")
    )
    page = queries.event_page(request.user, **form.query()) if form.is_valid() else None
    lines = failure_lines(request.user, page.events) if page else {}
    rows = [(event, lines.get(failure_key(event), "")) for event in page.events] if page else []
    context = {"form": form, "page": page, "rows": rows, "shareable": form.shareable()}
    return render(request, "tasklogs/events.html", context)


@require_safe
@login_required
def task_timeline(request: HttpRequest, host: str, queue: str, task_id: str) -> HttpResponse:
    try:
        timeline = queries.task_timeline(
            request.user,
            host,
            queue,
            task_id,
            after=request.GET.get("after", ""),
            before=request.GET.get("before", ""),
        )
    except queries.BadPage:
        return HttpResponseBadRequest(
            "Not a page of this timeline: follow its Earlier and Later links, or open it "
            "without after= and before=.",
            content_type="text/plain; charset=utf-8",
        )
    if timeline is None:
        raise Http404
    lines = failure_lines(request.user, [*timeline.events, *timeline.last])
    rows, last_rows = timeline_rows(timeline.events, lines), timeline_rows(timeline.last, lines)
    context = {"timeline": timeline, "rows": rows, "last_rows": last_rows}
    return render(request, "tasklogs/task.html", context)


def _archived(request: HttpRequest, **address: Any) -> tuple[BinaryIO, str]:
    """The payload at `address` (host, queue, task_id, kind, attempt, event), opened with its
    file's name, if the user may read it; 404 for anything else."""
    opened = open_payload(request.user, settings.TASKHOSTER_LOGS_DIR, **address)
    if opened is None:
        raise Http404
    return opened


@require_safe
@login_required
def payload_page(request: HttpRequest, **address: Any) -> HttpResponse:
    """The payload with what it is: task, queue, kind, attempt and event; the raw file linked."""
    body, name = _archived(request, **address)
    shown = readable(body, _size(body))
    return render(request, "tasklogs/payload.html", {
        **address, "file": name, "shown": shown,
        "raw_url": request.path.removesuffix("/view"),  # the same address, less the page
    })  # fmt: skip


def _size(body: BinaryIO) -> int:
    """The payload's bytes: a file on disk, or a PostgreSQL queue's body read into memory."""
    size = body.seek(0, os.SEEK_END)
    body.seek(0)
    return size


@require_safe
@login_required
def payload(request: HttpRequest, **address: Any) -> FileResponse:
    """A task-wide payload (`kind` only), or the result or error body of one event."""
    body, name = _archived(request, **address)
    # Inline, so the link's new tab shows the JSON: the browser treats application/json with
    # nosniff as text, and the sandboxing CSP keeps it from running anything even if it did not.
    response = FileResponse(
        body,
        as_attachment=False,
        filename=f"{address['task_id']}-{name}",
        content_type="application/json; charset=utf-8",
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = PAYLOAD_POLICY
    return response
